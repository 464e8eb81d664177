//! Prints verification's work estimate (multiply-adds, `infopt_verify::work`)
//! and largest activation of a model at each size verification would try,
//! or at the sizes given: the figures behind `WORK_BUDGET`.
//!
//!     cargo run -p infopt-verify --example work_estimate -- MODEL.onnx [NAME:1x3x640x640]...

use infopt_runtime::InputShapes;
use infopt_verify::{activations, shapes, work};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: work_estimate MODEL.onnx [NAME:1x3x640x640]...");
        std::process::exit(2);
    };
    let model = match infopt_ir::load::load_model(std::path::Path::new(path)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(3);
        }
    };
    let mut base = InputShapes::new();
    for arg in &args[1..] {
        let Some((name, dims)) = arg.split_once(':') else {
            eprintln!("error: '{arg}' is not NAME:DIMS");
            std::process::exit(2);
        };
        let dims: Option<Vec<usize>> = dims.split('x').map(|d| d.parse().ok()).collect();
        let Some(dims) = dims else {
            eprintln!("error: '{arg}': dims are numbers joined by x");
            std::process::exit(2);
        };
        base = base.with_shape(name, dims);
    }
    for candidate in shapes::candidates(&model, &base) {
        let Some(inferred) = activations::infer_at(&model, &candidate.shapes) else {
            println!(
                "{}: the declarations do not allow these sizes",
                candidate.label
            );
            continue;
        };
        let w = work::work_in(&inferred);
        let largest = activations::largest_in(&inferred);
        println!(
            "{} ({}): cost {:.3e}, {:.3e} elements written ({:.2}x the budget); heaviest {}; largest activation {}",
            candidate.label,
            inferred.sizes_text(),
            w.total as f64,
            w.elements as f64,
            w.total as f64 / work::WORK_BUDGET as f64,
            w.heaviest.map_or("none".into(), |h| format!(
                "'{}' ({}) {:.3e}",
                h.node, h.op, h.work as f64
            )),
            largest.map_or("none".into(), |l| format!(
                "'{}' ({}) {} bytes",
                l.node, l.op, l.bytes
            )),
        );
    }
}
