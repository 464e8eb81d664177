//! TensorRT's version number, as `getInferLibVersion` encodes it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TrtVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl TrtVersion {
    /// Decodes `(major * 100 + minor) * 100 + patch` (`getInferLibVersion`).
    pub fn from_encoded(value: i32) -> TrtVersion {
        let v = value.max(0) as u32;
        TrtVersion {
            major: v / 10000,
            minor: v / 100 % 100,
            patch: v % 100,
        }
    }
}

impl std::fmt::Display for TrtVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_get_infer_lib_version() {
        assert_eq!(
            TrtVersion::from_encoded(110400),
            TrtVersion {
                major: 11,
                minor: 4,
                patch: 0
            }
        );
        assert_eq!(TrtVersion::from_encoded(101301).to_string(), "10.13.1");
    }
}
