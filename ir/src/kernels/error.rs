//! The error of a reference kernel.

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KernelError {
    #[error("{0}")]
    Invalid(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("the output would be {bytes} bytes, over the limit of {limit} bytes")]
    TooLarge { bytes: u64, limit: u64 },
}

impl KernelError {
    pub fn invalid(msg: impl Into<String>) -> KernelError {
        KernelError::Invalid(msg.into())
    }
}
