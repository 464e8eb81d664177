"""Our hand-written ONNX message declarations (ir/src/proto.rs) against the
descriptors of the installed onnx package: every field present, with the
same number, and repeated scalars packed exactly where ONNX packs them.
prost drops unknown fields, so a missing field would silently lose data."""

from __future__ import annotations

import re

from onnx import onnx_ml_pb2 as pb

import _interop

NESTED = {
    "TensorSegment": "TensorProto.Segment", "Tensor": "TypeProto.Tensor", "Sequence": "TypeProto.Sequence",
    "Map": "TypeProto.Map", "Optional": "TypeProto.Optional", "SparseTensor": "TypeProto.SparseTensor",
    "Opaque": "TypeProto.Opaque", "Dimension": "TensorShapeProto.Dimension",
}


def _declared():
    structs, cur, attr = {}, None, None
    for line in (_interop.REPO / "ir/src/proto.rs").read_text().splitlines():
        m = re.match(r"\s*pub struct (\w+)", line)
        if m:
            cur = m.group(1)
            structs[cur] = {}
            continue
        m = re.match(r"\s*#\[prost\((.*)\)\]", line)
        if m and cur:
            attr = m.group(1)
            continue
        m = re.match(r"\s*pub (r#)?(\w+): ", line)
        if m and cur and attr:
            tags = re.findall(r'tags? = "([\d, ]+)"', attr)
            structs[cur][m.group(2)] = (tags[0] if tags else None, attr)
            attr = None
    return structs


def _descriptor(name):
    parts = NESTED.get(name, name).split(".")
    d = pb.DESCRIPTOR.message_types_by_name[parts[0]]
    for p in parts[1:]:
        d = d.nested_types_by_name[p]
    return d


def test_every_message_and_field_matches_onnx():
    structs = _declared()
    problems = []
    for top in pb.DESCRIPTOR.message_types_by_name:
        if top not in structs:
            problems.append(f"message {top} not declared")
    for name, fields in structs.items():
        d = _descriptor(name)
        for f in d.fields:
            if f.containing_oneof:
                continue
            if f.name not in fields:
                problems.append(f"{name}.{f.name} (field {f.number}) missing")
                continue
            tag, attr = fields[f.name]
            if tag != str(f.number):
                problems.append(f"{name}.{f.name}: tag {tag}, onnx says {f.number}")
            if f.is_repeated and f.type not in (f.TYPE_MESSAGE, f.TYPE_STRING, f.TYPE_BYTES):
                packed = 'packed = "false"' not in attr
                if packed != f.is_packed:
                    problems.append(f"{name}.{f.name}: packed={packed}, onnx says {f.is_packed}")
    assert not problems, "\n".join(problems)
    oneof = sorted(f.number for f in _descriptor("TypeProto").fields if f.containing_oneof)
    assert oneof == [1, 4, 5, 7, 8, 9]
