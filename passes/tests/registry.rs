//! Marks every node with a `registered` doc string (a test-only pass,
//! declared in this one file to show that a pass needs no other file).
//!
//! ## What it does
//! Sets the `doc_string` of every node of the main graph to the configured
//! `text`, and reads a side value (`Greeting`) from the pass context.
//!
//! ## When it declines
//! Never.
//!
//! ## Numerics
//! Exact: doc strings do not change the computation.
//!
//! ## Example
//! `- mark-nodes: { text: hello }`

use infopt_ir::Model;
use infopt_passes::config::PipelineConfig;
use infopt_passes::registry::{self, DOC_SECTIONS};
use infopt_passes::{DriverOptions, Flow, Pass, PassCx, PassError, SideData};

#[derive(serde::Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
struct MarkOptions {
    #[serde(default)]
    text: String,
}

struct MarkNodes {
    text: String,
}

/// Side data the test hands the pass through the pipeline.
struct Greeting(String);

impl Pass for MarkNodes {
    fn name(&self) -> &'static str {
        "mark-nodes"
    }
    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let suffix = cx
            .side
            .get::<Greeting>()
            .map(|g| g.0.clone())
            .unwrap_or_default();
        let ids = model.graph.node_ids();
        for id in &ids {
            model.graph.node_mut(*id).extra.doc_string = Some(format!("{}{suffix}", self.text));
        }
        Ok(ids.len())
    }
}

infopt_passes::register_pass! {
    name: "mark-nodes",
    kind: Canonicalize,
    file: "registry.rs",
    options: MarkOptions,
    build: |o: &MarkOptions| MarkNodes { text: o.text.clone() },
}

#[test]
fn every_registered_pass_is_documented_and_configurable() {
    for info in registry::registry() {
        assert!(
            info.missing_doc_sections().is_empty(),
            "{} lacks {:?}",
            info.name,
            info.missing_doc_sections()
        );
        assert!(!info.summary().is_empty(), "{}", info.name);
        assert_eq!(info.default_config().name(), info.name);
        if info.hidden {
            continue;
        }
        let yaml = format!("version: 1\npasses:\n  - {0}\n  - {0}: {{}}\n", info.name);
        let config = PipelineConfig::from_yaml(&yaml, "test").expect("parses");
        assert_eq!(config.pass_names(), vec![info.name, info.name]);
        let bad = format!(
            "version: 1\npasses:\n  - {}: {{ no_such_option: 1 }}\n",
            info.name
        );
        let e = PipelineConfig::from_yaml(&bad, "test")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no_such_option"), "{}: {e}", info.name);
    }
}

#[test]
fn a_pass_declared_in_one_file_joins_registry_yaml_and_docs() {
    assert!(registry::find("mark-nodes").is_none());
    registry::register(&INFO);
    let info = registry::find("mark-nodes").expect("registered");
    assert!(registry::visible().any(|p| p.name == "mark-nodes"));
    assert!(info.missing_doc_sections().is_empty());
    assert!(
        info.summary().starts_with("Marks every node"),
        "{}",
        info.summary()
    );

    let yaml = "version: 1\npasses:\n  - mark-nodes: { text: hi }\n";
    let config = PipelineConfig::from_yaml(yaml, "test").expect("parses");
    let e = PipelineConfig::from_yaml("version: 1\npasses:\n  - mark-nodes: { txt: hi }\n", "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("txt") && e.contains("line 3"), "{e}");

    let mut b = infopt_ir::builder::GraphBuilder::new();
    let x = b.input(
        "x",
        infopt_ir::DataType::Float,
        infopt_ir::builder::dims(&["2"]),
    );
    let y = b.op("Relu", &[x], vec![]);
    b.output(y, "y", infopt_ir::DataType::Float, None);
    let mut model = b.build(17);
    let mut side = SideData::default();
    side.insert(Greeting(" there".into()));
    let run = infopt_passes::run_pipeline_with(
        &mut model,
        &config,
        &DriverOptions::default(),
        side,
        &mut |_, _| Ok(Flow::Continue),
    )
    .expect("runs");
    assert_eq!(run.records[0].rewrites, 1);
    let (_, node) = model.graph.nodes().next().unwrap();
    assert_eq!(node.extra.doc_string.as_deref(), Some("hi there"));
    let _ = DOC_SECTIONS;
}

#[test]
fn passes_declare_what_they_do_to_the_numbers() {
    use infopt_passes::registry::Numerics;
    for name in [
        "constants-to-initializers",
        "remove-initializer-inputs",
        "fix-shapes",
        "infer-shapes",
        "eliminate-dead",
    ] {
        assert_eq!(Numerics::of(name), Some(Numerics::Exact), "{name}");
    }
    for name in ["convert-float16", "convert-bfloat16"] {
        assert_eq!(Numerics::of(name), Some(Numerics::HalfPrecision), "{name}");
    }
    // Undeclared: the same function up to rounding.
    for name in ["fuse-conv-bn", "fold-constants", "eliminate-identity"] {
        assert_eq!(Numerics::of(name), Some(Numerics::Rounding), "{name}");
    }
    assert_eq!(Numerics::of("no-such-pass"), None);
}
