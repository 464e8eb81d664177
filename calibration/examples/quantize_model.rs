//! Runs `quantize-int8` on one model file until the CLI's `optimize --int8`
//! does (used by bench/quant_bench.py):
//! `quantize_model IN.onnx RANGES.json OUT.onnx [tensorrt|onnxruntime|portable] [int8|qdq]`

use std::path::Path;

use infopt_ir::Model;
use infopt_passes::{DriverOptions, Flow, PipelineConfig, Target};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err(
            "usage: quantize_model IN.onnx RANGES.json OUT.onnx [target] [int8|qdq]".into(),
        );
    }
    infopt_calibration::quantize::register();
    let target = match args.get(4).map(String::as_str).unwrap_or("onnxruntime") {
        "tensorrt" => Target::Tensorrt,
        "portable" => Target::Portable,
        _ => Target::Onnxruntime,
    };
    let weights = if args.get(5).map(String::as_str) == Some("qdq") {
        "qdq"
    } else {
        "int8"
    };
    // Extra options as a YAML map body, e.g. "activations: int8, depthwise: true".
    let extra = args.get(6).map(|e| format!(", {e}")).unwrap_or_default();
    let mut model = Model::load(Path::new(&args[1]))?;
    let yaml = format!(
        "version: 1\ntarget: {target}\npasses:\n  - quantize-int8: {{ ranges: \"{}\", weights: {weights}{extra} }}\n",
        args[2]
    );
    let config = PipelineConfig::from_yaml(&yaml, "quantize_model")?;
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    let run = infopt_passes::run_pipeline(&mut model, &config, &options, &mut |_, _| {
        Ok(Flow::Continue)
    })?;
    for n in &run.notes {
        println!("{n}");
    }
    for d in run.declined.iter().take(20) {
        println!("declined {}: {}", d.at, d.reason);
    }
    model.save(Path::new(&args[3]), &infopt_ir::SaveOptions::default())?;
    Ok(())
}
