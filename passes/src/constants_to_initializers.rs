//! Turns `Constant` nodes into initializers.
//!
//! ## What it does
//! Every `Constant` node (with `value`, `value_float(s)`, `value_int(s)` or
//! `value_string(s)`) becomes an initializer holding the same tensor under the
//! same name. Exporters emit hundreds of these (torch.onnx writes every literal
//! as a Constant); as initializers they cost no node and every other pass sees
//! them as constants. Works inside subgraphs too (as subgraph initializers).
//!
//! ## When it declines
//! `sparse_value` constants (kept as nodes), and attributes that refer to a
//! function attribute (`ref_attr_name`, only valid inside functions).
//!
//! ## Numerics
//! Exact: the same bytes.
//!
//! ## Example
//! `c = Constant(value=[2.0])`, `y = Mul(x, c)` becomes initializer `c = [2.0]`
//! and `y = Mul(x, c)`.

crate::register_pass! {
    name: "constants-to-initializers",
    kind: Canonicalize,
    file: "constants_to_initializers.rs",
    options: crate::registry::NoOptions,
    build: |_| ConstantsToInitializers,
    numerics: Exact,
}

use infopt_ir::proto::TensorProto;
use infopt_ir::{DataType, Graph, Model, NodeId, Tensor};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::for_each_graph_mut;

pub struct ConstantsToInitializers;

/// The tensor a Constant node produces, or why it cannot be read.
pub fn constant_value(g: &Graph, id: NodeId) -> Result<Tensor, String> {
    let node = g.node(id);
    let Some(attr) = node.attributes.first() else {
        return Err("Constant without a value attribute".into());
    };
    if attr.proto.ref_attr_name.is_some() {
        return Err("value refers to a function attribute".into());
    }
    let p = &attr.proto;
    let scalar_or_list = |dtype: DataType, dims: Vec<i64>, fill: &dyn Fn(&mut TensorProto)| {
        let mut t = TensorProto {
            dims,
            data_type: Some(dtype.code()),
            ..Default::default()
        };
        fill(&mut t);
        Tensor::from_proto(t)
    };
    let err = |e: infopt_ir::IrError| e.to_string();
    Ok(match attr.name() {
        "value" => node
            .attr_tensor("value")
            .map_err(err)?
            .ok_or("Constant value is missing")?,
        "value_float" => {
            let f = node.attr_float("value_float").map_err(err)?.unwrap_or(0.0);
            Tensor::from_f32(vec![], &[f])
        }
        "value_floats" => {
            let fs = node
                .attr_floats("value_floats")
                .map_err(err)?
                .unwrap_or(&[])
                .to_vec();
            Tensor::from_f32(vec![fs.len() as i64], &fs)
        }
        "value_int" => {
            let i = node.attr_int("value_int").map_err(err)?.unwrap_or(0);
            Tensor::from_i64(vec![], &[i])
        }
        "value_ints" => {
            let is = node
                .attr_ints("value_ints")
                .map_err(err)?
                .unwrap_or(&[])
                .to_vec();
            Tensor::from_i64(vec![is.len() as i64], &is)
        }
        "value_string" => {
            let s = p.s.clone().unwrap_or_default();
            scalar_or_list(DataType::String, vec![], &|t| {
                t.string_data = vec![s.clone()]
            })
        }
        "value_strings" => {
            let ss = p.strings.clone();
            scalar_or_list(DataType::String, vec![ss.len() as i64], &|t| {
                t.string_data = ss.clone()
            })
        }
        "sparse_value" => return Err("sparse constants are kept as nodes".into()),
        other => return Err(format!("unknown Constant attribute '{other}'")),
    })
}

fn convert_graph(g: &mut Graph, cx: &mut PassCx) -> usize {
    let mut count = 0;
    for id in g.node_ids() {
        if !g.node(id).is("Constant") {
            continue;
        }
        let Some(out) = g.node(id).outputs.first().copied().flatten() else {
            continue;
        };
        let tensor = match constant_value(g, id) {
            Ok(t) => t,
            Err(reason) => {
                let at = g.node(id).name_or_op().to_string();
                cx.decline(&at, reason);
                continue;
            }
        };
        let name = g.value(out).name.clone();
        let init = g.add_initializer(&name, tensor);
        g.replace_all_uses(out, init);
        g.remove_node(id);
        g.remove_value(out);
        g.value_mut(init).name = name;
        count += 1;
    }
    count
}

impl Pass for ConstantsToInitializers {
    fn name(&self) -> &'static str {
        "constants-to-initializers"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let mut count = 0;
        for_each_graph_mut(&mut model.graph, &mut |g| {
            count += convert_graph(g, cx);
            Ok(())
        })?;
        Ok(count)
    }
}
