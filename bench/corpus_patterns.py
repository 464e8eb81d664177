"""Small graphs of our own that exercise one rewrite each, in the spirit of an
optimizer's test suite (nop ops, consecutive ops, pads into pools, ...).

`cases()` yields (name, ModelProto, inputs). Graphs are written in the ONNX
text format; the inputs are seeded random arrays of the declared shapes.
"""
import itertools

import numpy as np
import onnx
from onnx import helper, parser

OPSET = 17


def model(text, opset=OPSET):
    g = parser.parse_graph(text)
    # Output shapes written above are a reading aid; the ones kept are what
    # ONNX shape inference derives, so a slip in a hand-written shape cannot
    # make a graph invalid.
    declared = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in g.output]
    for o in g.output:
        o.type.tensor_type.ClearField("shape")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m)
    for o, io, d in zip(m.graph.output, inferred.graph.output, declared):
        o.CopyFrom(io if io.type.tensor_type.HasField("shape") else d)
    return m


def feeds(m, seed=0):
    rng = np.random.default_rng(seed)
    init = {i.name for i in m.graph.initializer}
    out = {}
    for i in m.graph.input:
        if i.name in init:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dt == np.bool_:
            out[i.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif np.issubdtype(dt, np.integer):
            out[i.name] = rng.integers(0, 3, size=shape).astype(dt)
        else:
            out[i.name] = rng.standard_normal(shape).astype(dt)
    return out


def case(name, text, opset=OPSET):
    m = model(text, opset)
    onnx.checker.check_model(m, full_check=True)
    return name, m, feeds(m)


def unary_chains():
    # Consecutive idempotent ops keep one; non-idempotent ones stay.
    for op in ["Relu", "Abs", "Ceil", "Floor", "Round", "Sign", "Neg", "Sigmoid", "Exp"]:
        for k in (2, 3):
            body = "\n".join(f"t{i + 1} = {op}(t{i})" for i in range(k))
            yield case(f"chain_{op}_{k}", f"""g (float[2,3,4] t0) => (float[2,3,4] t{k}) {{ {body} }}""")


def argmax_monotone():
    for op, pre in itertools.product(["ArgMax", "ArgMin"],
                                     ["Softmax", "LogSoftmax", "Exp", "Log", "Sqrt", "Sigmoid", "Tanh"]):
        for axis, pre_axis in [(1, 1), (2, 2), (1, 2), (-1, 2), (0, 0)]:
            attr = f"<axis={pre_axis}>" if pre in ("Softmax", "LogSoftmax") else ""
            src = "xa" if pre in ("Log", "Sqrt") else "x"
            pre_abs = "xa = Abs(x)" if src == "xa" else ""
            for keep in (0, 1):
                shape = "[2,3,4]"
                out_shape = [2, 3, 4]
                ax = axis % 3
                if keep:
                    out_shape[ax] = 1
                else:
                    out_shape.pop(ax)
                yield case(f"argmonotone_{op}_{pre}_ax{axis}_pre{pre_axis}_k{keep}",
                           f"""g (float{shape} x) => (int64{out_shape} y) {{
                                 {pre_abs}
                                 s = {pre}{attr}({src})
                                 y = {op}<axis={axis}, keepdims={keep}>(s) }}""")


def reduce_unsqueeze():
    reds = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
            "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"]
    for red, axes1, axes2, keep in itertools.product(reds, [[1], [1, 2], [2]], [[0], [0, 1], [1]], [0, 1]):
        shape = [5, 7, 9]
        after = [1 if i in axes1 else d for i, d in enumerate(shape)] if keep else [
            d for i, d in enumerate(shape) if i not in axes1]
        for a in axes2:
            after.insert(a, 1)
        src = "xa" if red in ("ReduceLogSum",) else "x"
        pre = "xa = Abs(x)" if src == "xa" else ""
        # opset 18: every reduce takes axes as an input
        ax1 = ",".join(map(str, axes1))
        ax2 = ",".join(map(str, axes2))
        yield case(f"reduce_unsqueeze_{red}_{ax1}_{ax2}_k{keep}".replace(",", "-"),
                   f"""g (float[5,7,9] x) => (float{after} z) {{
                         {pre}
                         a1 = Constant<value=int64[{len(axes1)}]{{{ax1}}}>()
                         a2 = Constant<value=int64[{len(axes2)}]{{{ax2}}}>()
                         y = {red}<keepdims={keep}>({src}, a1)
                         z = Unsqueeze(y, a2) }}""", opset=18)


def pads_into_pools():
    for pool, mode, value, pads in itertools.product(
            ["AveragePool", "MaxPool"], ["constant", "reflect", "edge"], [None, "0.0", "1.5", "-inf"],
            [[0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 2, 0, 0, 0, 0, 2], [0, 1, 1, 1, 0, 0, 1, 1],
             [0, 0, -1, 0, 0, 0, 0, 0]]):
        if mode != "constant" and value is not None:
            continue
        if value == "-inf":
            value_line = "v = Constant<value=float[1]{-inf}>()"  # noqa
            value_line = "v0 = Constant<value=float{0.0}>()\nvv = Constant<value=float{1.0}>()\nv = Div(vv, v0)\nv1 = Neg(v)"
            vin = ", v1"
        elif value is not None:
            value_line = f"v1 = Constant<value=float{{{value}}}>()"
            vin = ", v1"
        else:
            value_line, vin = "", ""
        h = 6 + pads[2] + pads[6]
        w = 6 + pads[3] + pads[7]
        oh, ow = h - 1, w - 1
        extra = " , count_include_pad=1" if pool == "AveragePool" else ""
        for cip in ([0, 1] if pool == "AveragePool" else [None]):
            attr = f"<kernel_shape=[2,2]{', count_include_pad=' + str(cip) if cip is not None else ''}>"
            del extra
            extra = ""
            name = f"pad_{pool}_{mode}_{value}_{'_'.join(map(str, pads))}_cip{cip}".replace("-", "m").replace(".", "p")
            yield case(name, f"""g (float[1,2,6,6] x) => (float[1,2,{oh},{ow}] y) {{
                                   p = Constant<value=int64[8]{{{','.join(map(str, pads))}}}>()
                                   {value_line}
                                   xp = Pad<mode="{mode}">(x, p{vin})
                                   y = {pool}{attr}(xp) }}""")


def pads_into_conv():
    for mode, pads, value in itertools.product(
            ["constant", "reflect"], [[0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 2, 0, 0, 1, 0],
                                      [0, 0, -1, 0, 0, 0, 0, 0]], [None, "0.0", "2.0"]):
        if mode != "constant" and value is not None:
            continue
        vline = f"v = Constant<value=float{{{value}}}>()" if value else ""
        vin = ", v" if value else ""
        c = 2 + pads[1] + pads[5]
        h = 6 + pads[2] + pads[6]
        w = 6 + pads[3] + pads[7]
        for existing in ([0, 0, 0, 0], [1, 0, 1, 0]):
            oh, ow = h - 2 + existing[0] + existing[2], w - 2 + existing[1] + existing[3]
            name = f"padconv_{mode}_{value}_{'_'.join(map(str, pads))}_{''.join(map(str, existing))}".replace("-", "m")
            yield case(name, f"""g (float[1,2,6,6] x, float[3,{c},3,3] wt) => (float[1,3,{oh},{ow}] y) {{
                                   p = Constant<value=int64[8]{{{','.join(map(str, pads))}}}>()
                                   {vline}
                                   xp = Pad<mode="{mode}">(x, p{vin})
                                   y = Conv<pads=[{','.join(map(str, existing))}]>(xp, wt) }}""")


def consecutive_shape_ops():
    yield case("squeeze_squeeze", """g (float[1,1,5,1,7] x) => (float[5,7] z) {
        a = Constant<value=int64[2]{0,3}>()
        b = Constant<value=int64[1]{0}>()
        y = Squeeze(x, a)
        z = Squeeze(y, b) }""")
    yield case("squeeze_squeeze_neg", """g (float[1,1,5,1,7] x) => (float[5,7] z) {
        a = Constant<value=int64[2]{-2,0}>()
        b = Constant<value=int64[1]{-3}>()
        y = Squeeze(x, a)
        z = Squeeze(y, b) }""")
    yield case("squeeze_default_squeeze", """g (float[1,1,5,1,7] x) => (float[5,7] z) {
        y = Squeeze(x)
        z = Identity(y) }""")
    yield case("squeeze_unsqueeze_same", """g (float[3,1,5] x) => (float[3,1,5] z) {
        a = Constant<value=int64[1]{1}>()
        y = Squeeze(x, a)
        z = Unsqueeze(y, a) }""")
    yield case("unsqueeze_squeeze_same", """g (float[3,5] x) => (float[3,5] z) {
        a = Constant<value=int64[1]{-1}>()
        y = Unsqueeze(x, a)
        z = Squeeze(y, a) }""")
    yield case("squeeze_unsqueeze_other", """g (float[3,1,5] x) => (float[3,5,1] z) {
        a = Constant<value=int64[1]{1}>()
        b = Constant<value=int64[1]{2}>()
        y = Squeeze(x, a)
        z = Unsqueeze(y, b) }""")
    yield case("unsqueeze_unsqueeze", """g (float[4,6,5] x) => (float[1,1,1,4,6,1,5,1,1,1] z) {
        a = Constant<value=int64[4]{0,1,4,-1}>()
        b = Constant<value=int64[3]{1,-1,-2}>()
        y = Unsqueeze(x, a)
        z = Unsqueeze(y, b) }""")
    yield case("reshape_chain3", """g (float[1,4,5] x) => (float[2,5,2] z) {
        s1 = Constant<value=int64[2]{5,4}>()
        s2 = Constant<value=int64[3]{1,20,1}>()
        s3 = Constant<value=int64[3]{2,5,2}>()
        a = Reshape(x, s1)
        b = Reshape(a, s2)
        z = Reshape(b, s3) }""")
    yield case("reshape_nop", """g (float[2,3,4] x) => (float[2,3,4] z) {
        s = Constant<value=int64[3]{2,3,4}>()
        y = Reshape(x, s)
        z = Relu(y) }""")
    yield case("reshape_nop_neg1", """g (float[2,3,4] x) => (float[2,3,4] z) {
        s = Constant<value=int64[3]{2,-1,4}>()
        y = Reshape(x, s)
        z = Relu(y) }""")
    yield case("reshape_nop_zero", """g (float[2,3,4] x) => (float[2,3,4] z) {
        s = Constant<value=int64[3]{0,0,-1}>()
        y = Reshape(x, s)
        z = Relu(y) }""")
    yield case("flatten_nop_axis1", """g (float[2,3] x) => (float[2,3] z) {
        y = Flatten<axis=1>(x)
        z = Relu(y) }""")
    yield case("flatten_nop_axis0", """g (float[1,6] x) => (float[1,6] z) {
        y = Flatten<axis=0>(x)
        z = Relu(y) }""")
    yield case("flatten_not_nop", """g (float[2,3,4] x) => (float[2,12] z) {
        y = Flatten<axis=1>(x)
        z = Relu(y) }""")
    for perm1, perm2 in [([1, 0, 2], [1, 0, 2]), ([1, 2, 0], [0, 2, 1]), ([2, 0, 1], [1, 2, 0]), (None, None)]:
        a1 = f"<perm=[{','.join(map(str, perm1))}]>" if perm1 else ""
        a2 = f"<perm=[{','.join(map(str, perm2))}]>" if perm2 else ""
        x = np.zeros([2, 3, 4])
        y = np.transpose(np.transpose(x, perm1), perm2)
        yield case(f"transpose_transpose_{perm1}_{perm2}".replace(" ", "").replace(",", "").replace("[", "").replace("]", ""),
                   f"""g (float[2,3,4] x) => (float{list(y.shape)} z) {{
                        y = Transpose{a1}(x)
                        z = Transpose{a2}(y) }}""")
    yield case("transpose_nop", """g (float[2,3,4] x) => (float[2,3,4] z) {
        y = Transpose<perm=[0,1,2]>(x)
        z = Relu(y) }""")
    yield case("concat_concat", """g (float[2,3] a, float[2,3] b, float[2,3] c) => (float[2,9] z) {
        y = Concat<axis=1>(a, b)
        z = Concat<axis=1>(y, c) }""")
    yield case("concat_concat_twice", """g (float[2,3] a, float[2,3] b, float[2,3] c) => (float[2,15] z) {
        y = Concat<axis=1>(a, b)
        z = Concat<axis=-1>(c, y, y) }""")
    yield case("concat_concat_other_axis", """g (float[2,3] a, float[2,3] b, float[2,6] c) => (float[4,6] z) {
        y = Concat<axis=1>(a, b)
        z = Concat<axis=0>(y, c) }""")
    yield case("concat_single", """g (float[2,3] a) => (float[2,3] z) {
        y = Concat<axis=1>(a)
        z = Relu(y) }""")
    yield case("split_single", """g (float[2,3] a) => (float[2,3] z) {
        y = Split<axis=1>(a)
        z = Relu(y) }""")
    yield case("expand_nop", """g (float[2,3] a) => (float[2,3] z) {
        s = Constant<value=int64[2]{1,1}>()
        y = Expand(a, s)
        z = Relu(y) }""")
    yield case("expand_nop_1d", """g (float[2,3] a) => (float[2,3] z) {
        s = Constant<value=int64[1]{3}>()
        y = Expand(a, s)
        z = Relu(y) }""")
    yield case("dropout_nop", """g (float[2,3] a) => (float[2,3] z) {
        y = Dropout(a)
        z = Relu(y) }""")
    yield case("cast_nop", """g (float[2,3] a) => (float[2,3] z) {
        y = Cast<to=1>(a)
        z = Relu(y) }""")
    yield case("cast_cast_widen", """g (float[2,3] a) => (float[2,3] z) {
        y = Cast<to=11>(a)
        z = Cast<to=1>(y) }""")
    yield case("identity_chain", """g (float[2,3] a) => (float[2,3] z) {
        y = Identity(a)
        w = Identity(y)
        z = Relu(w) }""")
    yield case("identity_output", """g (float[2,3] a) => (float[2,3] z) {
        y = Relu(a)
        z = Identity(y) }""")
    yield case("identity_io", """g (float[2,3] a) => (float[2,3] z) {
        z = Identity(a) }""")
    yield case("pad_nop", """g (float[2,3] a) => (float[2,3] z) {
        p = Constant<value=int64[4]{0,0,0,0}>()
        y = Pad(a, p)
        z = Relu(y) }""")
    yield case("slice_nop", """g (float[2,3] a) => (float[2,3] z) {
        s = Constant<value=int64[1]{0}>()
        e = Constant<value=int64[1]{9223372036854775807}>()
        ax = Constant<value=int64[1]{1}>()
        y = Slice(a, s, e, ax)
        z = Relu(y) }""")
    yield case("slice_slice_hw", """g (float[1,3,8,8] x) => (float[1,3,4,4] z) {
        s0 = Constant<value=int64[1]{0}>()
        e = Constant<value=int64[1]{8}>()
        a2 = Constant<value=int64[1]{2}>()
        a3 = Constant<value=int64[1]{3}>()
        st = Constant<value=int64[1]{2}>()
        y = Slice(x, s0, e, a2, st)
        z = Slice(y, s0, e, a3, st) }""")
    yield case("slice_slice_same_axis", """g (float[1,3,8,8] x) => (float[1,3,3,8] z) {
        s1 = Constant<value=int64[1]{1}>()
        e1 = Constant<value=int64[1]{7}>()
        s2 = Constant<value=int64[1]{2}>()
        e2 = Constant<value=int64[1]{5}>()
        a2 = Constant<value=int64[1]{2}>()
        y = Slice(x, s1, e1, a2)
        z = Slice(y, s2, e2, a2) }""")
    yield case("focus4", """g (float[1,3,8,8] x) => (float[1,12,4,4] z) {
        s0 = Constant<value=int64[1]{0}>()
        s1 = Constant<value=int64[1]{1}>()
        e = Constant<value=int64[1]{9223372036854775807}>()
        a2 = Constant<value=int64[1]{2}>()
        a3 = Constant<value=int64[1]{3}>()
        st = Constant<value=int64[1]{2}>()
        y0 = Slice(x, s0, e, a2, st)
        z0 = Slice(y0, s0, e, a3, st)
        y1 = Slice(x, s1, e, a2, st)
        z1 = Slice(y1, s0, e, a3, st)
        y2 = Slice(x, s0, e, a2, st)
        z2 = Slice(y2, s1, e, a3, st)
        y3 = Slice(x, s1, e, a2, st)
        z3 = Slice(y3, s1, e, a3, st)
        z = Concat<axis=1>(z0, z1, z2, z3) }""")


def shape_ops():
    yield case("shape_gather", """g (float[2,3,4] x) => (int64 z) {
        s = Shape(x)
        i = Constant<value=int64{1}>()
        z = Gather<axis=0>(s, i) }""")
    yield case("shape_slice", """g (float[2,3,4] x) => (int64[2] z) {
        s = Shape(x)
        b = Constant<value=int64[1]{1}>()
        e = Constant<value=int64[1]{3}>()
        z = Slice(s, b, e) }""")
    yield case("shape_start_end", """g (float[2,3,4] x) => (int64[2] z) {
        z = Shape<start=-2>(x) }""")
    yield case("shape_op", """g (float[2,3,4] x) => (int64[3] z) {
        z = Shape(x) }""")
    yield case("shape_gather_unsqueeze_slice_matmul", """g (float[1] x) => (float[3,1,5,6] y) {
        t1 = Constant<value=float[3,4,5,6]{""" + ",".join(str((i % 7) / 7.0) for i in range(360)) + """}>()
        t2 = Constant<value=float[6,6]{""" + ",".join(str((i % 5) / 5.0) for i in range(36)) + """}>()
        s = Shape(x)
        i = Constant<value=int64{0}>()
        g1 = Gather<axis=0>(s, i)
        ax = Constant<value=int64[1]{0}>()
        u = Unsqueeze(g1, ax)
        st = Constant<value=int64[1]{0}>()
        sa = Constant<value=int64[1]{1}>()
        sl = Slice(t1, st, u, sa)
        y = MatMul(sl, t2) }""")
    yield case("concat_into_reshape", """g (float[2,3,4] x) => (float[2,12] z) {
        s = Shape(x)
        i = Constant<value=int64[1]{0}>()
        d = Gather<axis=0>(s, i)
        m = Constant<value=int64[1]{-1}>()
        c = Concat<axis=0>(d, m)
        z = Reshape(x, c) }""")
    yield case("concat_into_reshape_const", """g (float[2,3,4] x) => (float[6,4] z) {
        a = Constant<value=int64[1]{6}>()
        b = Constant<value=int64[1]{4}>()
        c = Concat<axis=0>(a, b)
        z = Reshape(x, c) }""")


def units():
    for op, unit, order in [("Mul", "1.0", "xc"), ("Mul", "1.0", "cx"), ("Add", "0.0", "xc"), ("Add", "0.0", "cx"),
                            ("Sub", "0.0", "xc"), ("Div", "1.0", "xc"), ("Pow", "1.0", "xc"),
                            ("Sub", "0.0", "cx")]:
        for cshape in ("[1]", "[3]", "", "[2,3]", "[1,1,1]"):
            n = {"[1]": 1, "[3]": 3, "": 1, "[2,3]": 6, "[1,1,1]": 1}[cshape]
            vals = ",".join([unit] * n)
            out_shape = "[1,2,3]" if cshape == "[1,1,1]" else "[2,3]"
            args = "x, c" if order == "xc" else "c, x"
            yield case(f"unit_{op}_{order}_{cshape or 'scalar'}".replace("[", "").replace("]", "").replace(",", "x"),
                       f"""g (float[2,3] x) => (float{out_shape} z) {{
                             c = Constant<value=float{cshape}{{{vals}}}>()
                             y = {op}({args})
                             z = Relu(y) }}""")
    yield case("unit_and_or_bool", """g (bool[2] x) => (bool[2] z) {
        t = Constant<value=bool[2]{1,1}>()
        f = Constant<value=bool[2]{0,0}>()
        a = And(t, x)
        b = Or(a, f)
        z = Not(b) }""")
    yield case("unit_concat_empty", """g (float[2] x) => (float[4] z) {
        e = Constant<value=float[0]{}>()
        a = Concat<axis=0>(e, x)
        z = Concat<axis=0>(a, a, e) }""")


def fusions():
    yield case("log_softmax", """g (float[2,5] x) => (float[2,5] z) {
        s = Softmax<axis=1>(x)
        z = Log(s) }""")
    yield case("log_softmax_two_uses", """g (float[2,5] x) => (float[2,5] z, float[2,5] w) {
        s = Softmax<axis=1>(x)
        z = Log(s)
        w = Relu(s) }""")
    yield case("log_softmax_opset11", """g (float[2,5] x) => (float[2,5] z) {
        s = Softmax<axis=1>(x)
        z = Log(s) }""", opset=11)
    for ta, tb in [(1, 0), (0, 1), (1, 1)]:
        a_shape = "[4,3]" if ta else "[3,4]"
        b_shape = "[5,4]" if tb else "[4,5]"
        at = "a2 = Transpose<perm=[1,0]>(a)" if ta else "a2 = Identity(a)"
        bt = "b2 = Transpose<perm=[1,0]>(b)" if tb else "b2 = Identity(b)"
        yield case(f"transpose_into_gemm_{ta}{tb}", f"""g (float{a_shape} a, float{b_shape} b, float[5] c) => (float[3,5] z) {{
            {at}
            {bt}
            z = Gemm(a2, b2, c) }}""")
    for bshape in ("[5]", "[1,5]", "[3,5]", "[1]"):
        yield case(f"matmul_add_{bshape}".replace("[", "").replace("]", "").replace(",", "x"),
                   f"""g (float[3,4] a, float[4,5] b, float{bshape} c) => (float[3,5] z) {{
                        m = MatMul(a, b)
                        z = Add(m, c) }}""")
    yield case("matmul_add_3d_nofuse", """g (float[2,3,4] a, float[4,5] b, float[5] c) => (float[2,3,5] z) {
        m = MatMul(a, b)
        z = Add(m, c) }""")
    yield case("matmul_add_bias_bcast_nofuse", """g (float[3,4] a, float[4,5] b, float[4,3,5] c) => (float[4,3,5] z) {
        m = MatMul(a, b)
        z = Add(m, c) }""")
    yield case("matmul_add_multi_use", """g (float[3,4] a, float[4,5] b, float[5] c) => (float[3,5] z, float[3,5] m) {
        m = MatMul(a, b)
        z = Add(m, c) }""")
    yield case("conv_add_bias", """g (float[1,2,6,6] x, float[3,2,3,3] w, float[1,3,1,1] b) => (float[1,3,4,4] z) {
        y = Conv(x, w)
        z = Add(y, b) }""")
    yield case("conv_add_scalar_bias", """g (float[1,2,6,6] x, float[3,2,3,3] w, float[1] b) => (float[1,3,4,4] z) {
        y = Conv(x, w)
        z = Add(y, b) }""")
    yield case("conv_add_3d_bias_nofuse", """g (float[1,2,6,6] x, float[3,2,3,3] w, float[3,4,4] b) => (float[1,3,4,4] z) {
        y = Conv(x, w)
        z = Add(y, b) }""")
    w = ",".join(str(((i * 7) % 11 - 5) / 5.0) for i in range(54))
    yield case("conv_add_const_bias", """g (float[1,2,6,6] x) => (float[1,3,4,4] z) {
        w = Constant<value=float[3,2,3,3]{""" + w + """}>()
        b = Constant<value=float[1,3,1,1]{0.5,-1.0,2.0}>()
        y = Conv(x, w)
        z = Add(y, b) }""")
    yield case("conv_bn", """g (float[1,2,6,6] x) => (float[1,3,4,4] z) {
        w = Constant<value=float[3,2,3,3]{""" + w + """}>()
        s = Constant<value=float[3]{0.5,1.5,2.0}>()
        bb = Constant<value=float[3]{0.1,0.2,0.3}>()
        mu = Constant<value=float[3]{0.0,1.0,-1.0}>()
        var = Constant<value=float[3]{1.0,2.0,0.5}>()
        y = Conv(x, w)
        z = BatchNormalization(y, s, bb, mu, var) }""")
    yield case("conv_mul_const", """g (float[1,2,6,6] x) => (float[1,3,4,4] z) {
        w = Constant<value=float[3,2,3,3]{""" + w + """}>()
        s = Constant<value=float[1,3,1,1]{0.5,1.5,2.0}>()
        y = Conv(x, w)
        z = Mul(y, s) }""")
    yield case("where_not", """g (bool[4] a, float[4] x, float[4] y) => (float[4] f) {
        b = Not(a)
        z = Where(b, x, y)
        f = Sign(z) }""")
    yield case("where_and_self", """g (bool[4] a, float[4] x, float[4] y) => (float[4] h) {
        m = And(a, a)
        g1 = Where(m, x, y)
        h = Sign(g1) }""")
    yield case("einsum_matmul", """g (float[2,3,4] a, float[2,4,5] b) => (float[2,3,5] z) {
        z = Einsum<equation="bij,bjk->bik">(a, b) }""")
    yield case("einsum_matmul_transposed", """g (float[2,3,4] a, float[2,5,4] b) => (float[2,3,5] z) {
        z = Einsum<equation="bij,bkj->bik">(a, b) }""")
    yield case("cse_two_relu", """g (float[2,3] a) => (float[2,3] z) {
        x = Relu(a)
        y = Relu(a)
        z = Add(x, y) }""")
    yield case("cse_attr", """g (float[2,3] a) => (float[2,3] z) {
        x = LeakyRelu<alpha=0.1>(a)
        y = LeakyRelu<alpha=0.1>(a)
        w = LeakyRelu<alpha=0.2>(a)
        v = Add(x, y)
        z = Add(v, w) }""")
    yield case("gelu_erf", """g (float[2,8] x) => (float[2,8] z) {
        c = Constant<value=float{1.4142135}>()
        h = Constant<value=float{0.5}>()
        o = Constant<value=float{1.0}>()
        d = Div(x, c)
        e = Erf(d)
        a = Add(e, o)
        m = Mul(x, a)
        z = Mul(m, h) }""")
    yield case("reduce_opset11", """g (float[2,3,4] x) => (float[2,1,1,4] z) {
        y = ReduceSum<axes=[1], keepdims=0>(x)
        z = Unsqueeze<axes=[1,2]>(y) }""", opset=11)
    yield case("gemm_reshape_add", """g (float[2,3,4] x, float[4,5] w) => (float[2,3,5] z) {
        s = Constant<value=int64[2]{6,4}>()
        r = Reshape(x, s)
        g1 = Gemm(r, w)
        s2 = Constant<value=int64[3]{2,3,5}>()
        r2 = Reshape(g1, s2)
        b = Constant<value=float[5]{1,2,3,4,5}>()
        z = Add(r2, b) }""")
    yield case("if_const_true", """g (float[2,3] x) => (float[2,3] z) {
        c = Constant<value=bool{1}>()
        z = If(c) <then_branch = t () => (float[2,3] a) { a = Relu(x) },
                   else_branch = e () => (float[2,3] b) { b = Neg(x) }> }""")
    yield case("loop_once", """g (float[2,3] x) => (float[2,3] z) {
        n = Constant<value=int64{1}>()
        c = Constant<value=bool{1}>()
        z = Loop(n, c, x) <body = b (int64 i, bool ci, float[2,3] v) => (bool co, float[2,3] vo) {
            co = Identity(ci)
            vo = Relu(v) }> }""")


def more_patterns():
    w = ",".join(str(((i * 5) % 9 - 4) / 4.0) for i in range(54))
    yield case("if_const_outer_ref", """g (float[2,3] x) => (float[2,3] z) {
        c = Constant<value=bool{0}>()
        y = Relu(x)
        z = If(c) <then_branch = t () => (float[2,3] a) { a = Neg(y) },
                   else_branch = e () => (float[2,3] b) { b = Abs(y) }> }""")
    yield case("dropout_graph_output", """g (float[2,3] x) => (float[2,3] z) {
        z = Dropout(x) }""", opset=11)
    yield case("dropout_ratio", """g (float[2,3] x) => (float[2,3] z) {
        y = Dropout<ratio=0.3>(x)
        z = Relu(y) }""", opset=11)
    yield case("qkv", """g (float[2,8] x) => (float[2,4] q, float[2,4] k, float[2,4] v) {
        wq = Constant<value=float[8,4]{""" + w[: w.index(",", 0)] + "," + ",".join(str(i / 32.0) for i in range(31)) + """}>()
        wk = Constant<value=float[8,4]{""" + ",".join(str((i % 5) / 5.0) for i in range(32)) + """}>()
        wv = Constant<value=float[8,4]{""" + ",".join(str((i % 7) / 7.0) for i in range(32)) + """}>()
        q = MatMul(x, wq)
        k = MatMul(x, wk)
        v = MatMul(x, wv) }""")
    yield case("split_nop_input", """g (float[2,6] x) => (float[2,6] z) {
        s = Constant<value=int64[1]{6}>()
        y = Split<axis=1>(x, s)
        z = Relu(y) }""")
    yield case("split_sizes_zero", """g (float[2,6] x) => (float[2,6] z) {
        s = Constant<value=int64[2]{6,0}>()
        a, b = Split<axis=1>(x, s)
        z = Concat<axis=1>(a, b) }""")
    yield case("castlike_empty_concat", """g (float[2,4,8] x) => (float[2,4,8] z) {
        e = Constant<value=float[2,4,0]{}>()
        c = CastLike(e, x)
        z = Concat<axis=2>(c, x) }""")
    yield case("castlike_same_type", """g (float[2,4] x, float[1] t) => (float[2,4] z) {
        c = CastLike(x, t)
        z = Relu(c) }""")
    yield case("shape_negative_dim_reshape", """g (float[2,3,4] x) => (float[2,12] z) {
        s = Constant<value=int64[2]{2,-1}>()
        z = Reshape(x, s) }""")
    yield case("cse_constants", """g (float[2,3] x) => (float[2,3] z) {
        a = Constant<value=float{2.0}>()
        b = Constant<value=float{2.0}>()
        p = Mul(x, a)
        q = Mul(x, b)
        z = Add(p, q) }""")
    yield case("bn_after_conv_bias", """g (float[1,2,6,6] x) => (float[1,3,4,4] z) {
        w = Constant<value=float[3,2,3,3]{""" + w + """}>()
        cb = Constant<value=float[3]{0.5,-0.5,1.0}>()
        s = Constant<value=float[3]{0.5,1.5,2.0}>()
        bb = Constant<value=float[3]{0.1,0.2,0.3}>()
        mu = Constant<value=float[3]{0.0,1.0,-1.0}>()
        var = Constant<value=float[3]{1.0,2.0,0.5}>()
        y = Conv(x, w, cb)
        z = BatchNormalization(y, s, bb, mu, var) }""")
    yield case("conv_add_bias_4d_input", """g (float[1,2,6,6] x, float[3,2,3,3] w, float[1,3,1,1] b) => (float[1,3,4,4] z) {
        y = Conv(x, w)
        z = Add(b, y) }""")
    yield case("conv_add_bias_tile", """g (float[1,2,6,6] x, float[3,2,3,3] w, float[1] b) => (float[1,3,4,4] z) {
        y = Conv(x, w)
        z = Add(y, b) }""")
    yield case("reshape_gelu_reshape", """g (float[6,8] x) => (float[6,8] z) {
        s1 = Constant<value=int64[3]{2,3,8}>()
        s2 = Constant<value=int64[2]{6,8}>()
        r = Reshape(x, s1)
        t = Tanh(r)
        h = Constant<value=float{0.5}>()
        m = Mul(t, h)
        q = Add(m, r)
        z = Reshape(q, s2) }""")
    yield case("matmul3d_between_reshapes", """g (float[2,24] x) => (float[8,5] z) {
        s1 = Constant<value=int64[3]{2,4,6}>()
        r = Reshape(x, s1)
        w = Constant<value=float[6,5]{""" + ",".join(str((i % 11) / 11.0) for i in range(30)) + """}>()
        b = Constant<value=float[5]{1,2,3,4,5}>()
        m = MatMul(r, w)
        a = Add(m, b)
        s2 = Constant<value=int64[2]{8,5}>()
        z = Reshape(a, s2) }""")


def attribute_opsets():
    """Older spellings: Pad-2 (pads/value attributes), Squeeze/Unsqueeze-11
    and Split-11 (axes/split attributes), Slice-1 (attributes)."""
    for pool in ("AveragePool", "MaxPool"):
        for value in ("0.0", "-1.5"):
            for pads in ("0,0,1,1,0,0,1,1", "0,0,2,0,0,0,0,0", "0,1,0,0,0,0,0,0"):
                yield case(f"pad2_{pool}_{value}_{pads}".replace(",", "").replace(".", "p").replace("-", "m"),
                           f"""g (float[1,2,6,6] x) => (float y) {{
                                 r = Relu(x)
                                 p = Pad<pads=[{pads}], value={value}>(r)
                                 y = {pool}<kernel_shape=[3,3]>(p) }}""", opset=10)
        yield case(f"pad2_conv_{pool}", """g (float[1,2,6,6] x, float[3,2,3,3] w) => (float y) {
            p = Pad<pads=[0,0,1,1,0,0,1,1]>(x)
            y = Conv(p, w) }""", opset=10)
    yield case("squeeze11_pair", """g (float[3,1,5] x) => (float[3,1,5] z) {
        y = Squeeze<axes=[1]>(x)
        z = Unsqueeze<axes=[1]>(y) }""", opset=11)
    yield case("squeeze11_chain", """g (float[1,1,5,1,7] x) => (float[5,7] z) {
        y = Squeeze<axes=[0,3]>(x)
        z = Squeeze<axes=[0]>(y) }""", opset=11)
    yield case("unsqueeze11_chain", """g (float[4,6] x) => (float z) {
        y = Unsqueeze<axes=[0,3]>(x)
        z = Unsqueeze<axes=[1,-1]>(y) }""", opset=11)
    yield case("split11_single", """g (float[2,6] x) => (float[2,6] z) {
        y = Split<axis=1, split=[6]>(x)
        z = Relu(y) }""", opset=11)
    yield case("slice1_pair", """g (float[1,3,8,8] x) => (float z) {
        y = Slice<starts=[0], ends=[8], axes=[2]>(x)
        z = Slice<starts=[1], ends=[7], axes=[3]>(y) }""", opset=9)
    yield case("dropout10_graph_output", """g (float[2,3] x) => (float[2,3] z) {
        z = Dropout<ratio=0.5>(x) }""", opset=10)
    yield case("reduce_keepdims11_unsqueeze", """g (float[5,7,9] x) => (float z) {
        y = ReduceMax<axes=[1,2], keepdims=0>(x)
        z = Unsqueeze<axes=[1,2]>(y) }""", opset=11)
    yield case("argmax11_softmax_last", """g (float[2,3,4] x) => (int64 z) {
        s = Softmax<axis=2>(x)
        z = ArgMax<axis=2>(s) }""", opset=11)
    yield case("argmax11_softmax_mid", """g (float[2,3,4] x) => (int64 z) {
        s = Softmax<axis=1>(x)
        z = ArgMax<axis=1>(s) }""", opset=11)


def older_opsets(gen, opsets=(10, 11)):
    """The same graphs converted down to older opsets (Pad, Squeeze,
    Unsqueeze, Slice, ... with attributes instead of inputs), where the ONNX
    version converter can."""
    from onnx import version_converter

    for name, m, inputs in gen():
        for op in opsets:
            try:
                old = version_converter.convert_version(m, op)
                onnx.checker.check_model(old, full_check=True)
            except Exception:  # noqa: BLE001 - not every graph has an older spelling
                continue
            yield f"{name}_opset{op}", old, inputs


def cases():
    for gen in (unary_chains, argmax_monotone, reduce_unsqueeze, pads_into_pools, pads_into_conv,
                consecutive_shape_ops, shape_ops, units, fusions, more_patterns, attribute_opsets):
        yield from gen()
    for gen in (pads_into_pools, pads_into_conv, consecutive_shape_ops, units, fusions):
        yield from older_opsets(gen)


if __name__ == "__main__":
    n = 0
    for name, m, _ in cases():
        n += 1
    print(n, "pattern graphs")
