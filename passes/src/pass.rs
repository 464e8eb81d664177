//! The `Pass` trait and the context a pass reports into.

use std::fmt;

use infopt_ir::{IrError, Model};

/// What the pipeline targets. Some rewrites only pay off (or only load) on one runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Standard ONNX only; runs anywhere.
    #[default]
    Portable,
    /// ONNX Runtime: `com.microsoft` contrib ops are allowed.
    Onnxruntime,
    /// TensorRT: standard ONNX, strongly typed.
    Tensorrt,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Portable => "portable",
            Target::Onnxruntime => "onnxruntime",
            Target::Tensorrt => "tensorrt",
        })
    }
}

/// A rewrite a pass considered and did not make, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declined {
    pub pass: &'static str,
    /// Node (or value) name the rewrite was anchored at.
    pub at: String,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error("pass '{pass}' left an invalid graph: {detail}")]
    BrokeGraph { pass: String, detail: String },
    /// A mistake in the pipeline or the command line (usage error).
    #[error("{0}")]
    Config(String),
    /// A pass panicked (a bug in infopt); the driver caught it.
    #[error(
        "pass '{pass}' crashed{}: {message}{}; this is a bug in infopt (please report it with the model)",
        node.as_ref().map(|n| format!(" at node {n}")).unwrap_or_default(),
        location.as_ref().map(|l| format!(" ({l})")).unwrap_or_default()
    )]
    Panicked {
        pass: String,
        node: Option<String>,
        message: String,
        location: Option<String>,
    },
    /// The user's model is malformed in a way only a pass discovers (an
    /// `If` branch with the wrong number of outputs, say): a model error.
    #[error("{0}")]
    Model(String),
}

/// Context handed to every pass: settings in, statistics out.
#[derive(Debug, Default)]
pub struct PassCx {
    pub target: Target,
    /// Imported version of the default ONNX domain (decides attribute-vs-input forms).
    pub opset: i64,
    /// Rewrites declined (all passes so far).
    pub declined: Vec<Declined>,
    /// Name of the pass currently running (set by the driver).
    pub current: &'static str,
    /// Notes for the report, printed: what the user asked for, or should
    /// act on (a dim they fixed whose consequence stays dynamic).
    pub notes: Vec<String>,
    /// Facts for the JSON report only, not printed (a dim nobody asked to
    /// fix stays dynamic; a built-in pipeline's ONNX Runtime-only pass does
    /// nothing for another target).
    pub details: Vec<String>,
    /// The pipeline is one of infopt's own (not the user's `-c` or
    /// `--passes`): a pass in it that cannot apply to the target is
    /// expected, not news.
    pub builtin_pipeline: bool,
    /// Data the pipeline hands to passes (a calibration table, a precision
    /// map), one value per type.
    pub side: SideData,
}

/// The ONNX Runtime execution providers the output is meant for, as the
/// user named them (`--ep cpu`), in [`SideData`]. Absent or empty: not said,
/// so the output should load in any provider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecutionProviders(pub Vec<String>);

impl ExecutionProviders {
    /// Only ONNX Runtime's CPU provider (named `cpu`, any case, or by its
    /// full name `CPUExecutionProvider`).
    pub fn cpu_only(&self) -> bool {
        !self.0.is_empty() && self.first_not_cpu().is_none()
    }

    /// The first named provider that is not the CPU one.
    pub fn first_not_cpu(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|p| {
                !p.eq_ignore_ascii_case("cpu") && !p.eq_ignore_ascii_case("CPUExecutionProvider")
            })
            .map(String::as_str)
    }
}

/// The providers compiled into the installed ONNX Runtime, in [`SideData`]
/// when `--ep` names none: what a session of the output registers by
/// default. Absent: no ONNX Runtime was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstalledProviders(pub Vec<String>);

impl InstalledProviders {
    /// The first provider that runs nodes on another device than the CPU
    /// (Azure's provider only forwards requests to a remote endpoint).
    pub fn first_not_cpu(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|p| {
                !p.eq_ignore_ascii_case("CPUExecutionProvider")
                    && !p.eq_ignore_ascii_case("AzureExecutionProvider")
            })
            .map(String::as_str)
    }
}

/// Values keyed by their type, for passes that need more than their options
/// (`cx.side.get::<RangeTable>()`).
#[derive(Default)]
pub struct SideData {
    values: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl SideData {
    /// Stores `value`, replacing an earlier value of the same type.
    pub fn insert<T: std::any::Any + Send + Sync>(&mut self, value: T) {
        self.values.retain(|v| !v.is::<T>());
        self.values.push(Box::new(value));
    }

    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.values.iter().find_map(|v| v.downcast_ref::<T>())
    }

    pub fn get_mut<T: std::any::Any>(&mut self) -> Option<&mut T> {
        self.values.iter_mut().find_map(|v| v.downcast_mut::<T>())
    }
}

impl fmt::Debug for SideData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SideData({} values)", self.values.len())
    }
}

impl PassCx {
    pub fn new(target: Target) -> PassCx {
        PassCx {
            target,
            ..Default::default()
        }
    }

    pub fn decline(&mut self, at: &str, reason: impl fmt::Display) {
        let d = Declined {
            pass: self.current,
            at: at.to_string(),
            reason: reason.to_string(),
        };
        // A fixed-point group revisits the same spot: record each reason once.
        if !self.declined.contains(&d) {
            self.declined.push(d);
        }
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// A fact for the JSON report only (see [`PassCx::details`]).
    pub fn detail(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !self.details.contains(&text) {
            self.details.push(text);
        }
    }

    /// Why a pass did nothing for this target or provider: a detail in a
    /// built-in pipeline (expected, not news), a note (once) in the
    /// user's own.
    pub fn not_applied(&mut self, text: String) {
        if self.builtin_pipeline {
            self.detail(text);
        } else if !self.notes.contains(&text) {
            self.note(text);
        }
    }

    /// Why the output is known to run on ONNX Runtime's CPU provider only:
    /// the user named only it (`--ep cpu`), or named none and the installed
    /// ONNX Runtime has no other. None when another provider is named or
    /// installed, or when no ONNX Runtime was found to say.
    pub fn cpu_only_reason(&self) -> Option<&'static str> {
        let named = self
            .side
            .get::<ExecutionProviders>()
            .cloned()
            .unwrap_or_default();
        if named.cpu_only() {
            return Some("the output is for ONNX Runtime's CPU provider, the one named");
        }
        if !named.0.is_empty() {
            return None;
        }
        let installed = self.side.get::<InstalledProviders>()?;
        installed.first_not_cpu().is_none().then_some(
            "no execution provider is named and the installed ONNX Runtime has only the CPU one",
        )
    }
}

/// A graph transformation. `run` returns the number of rewrites it applied
/// (0 means the model is unchanged), which is how fixed points are detected.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError>;
}
