#!/usr/bin/python3
"""Independent PyTorch forward of transformers' Wav2Vec2Model, for wav2vec2/reference_test.go.

usage:
    NVDP_W2V2_REF_OUT=/tmp/w2v2ref go test ./wav2vec2 -run TestWriteReferenceCheckpoints
    /usr/bin/python3 scripts/w2v2ref/w2v2_ref.py /tmp/w2v2ref wav2vec2/testdata/reference.safetensors

Needs only torch and numpy (not transformers). For every case directory under the input directory
(config.json, model.safetensors, input.safetensors with input_values [B, T] and attention_mask [B, T],
all written by the Go test from seeds) it computes, in float64 and with torch.nn.functional only,
the architecture documented for transformers' Wav2Vec2Model (eval mode, no SpecAugment):

  feature encoder   per layer conv1d(stride) -> GroupNorm(C groups, first layer only; "group") or
                    LayerNorm over channels (every layer; "layer"), eps 1e-5 -> exact erf GELU
  feature projection LayerNorm(layer_norm_eps) -> Linear
  frame mask        lengths by _get_feat_extract_output_lengths; padded frames set to 0;
                    additive key mask (1 - mask) * finfo.min
  positional conv   weight = g * v / ||v|| (norm over all axes but 2), conv1d(padding K//2,
                    groups), last frame dropped for even K, GELU; added to the frames
  encoder           post-LN (do_stable_layer_norm false): LayerNorm, layers
                    x = LN(x + Attn(x)); x = LN(x + FF(x)); pre-LN: layers
                    x = x + Attn(LN(x)); x = x + FF(LN(x)), then LayerNorm
  attention         q * dh^-0.5, softmax over keys, per-head, q/k/v/out projections with bias

Checkpoint names may carry the "wav2vec2." prefix and either weight-norm layout (weight_g/weight_v or
parametrizations.weight.original0/1); head tensors (projector., classifier.) are skipped. Every
encoder tensor in the file must be used. The output file holds, per case <name>:
<name>.last_hidden_state [B, F, H] (F32), <name>.frame_lengths [B] (I64), and metadata
<name>.input_abs_sum / <name>.param_abs_sum (sums of |value| of the input and of the encoder
tensors read), which the Go test compares to make sure it rebuilt the same checkpoint.
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

RDT = {'F32': np.float32, 'F64': np.float64, 'F16': np.float16, 'I64': np.int64}
DT = {np.dtype('float32'): 'F32', np.dtype('int64'): 'I64'}
HEADS = ("projector.", "classifier.", "layer_weights", "lm_head.", "quantizer.", "project_q.", "project_hid.")


def read_st(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=RDT[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items()}


def write_st(path, tensors, metadata):
    header, off, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        b = arr.tobytes()
        header[name] = {"dtype": DT[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = metadata
    h = json.dumps(header, sort_keys=True).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Weights:
    """Encoder tensors by canonical name (float64), recording which were used."""

    def __init__(self, path):
        self.w, self.used = {}, set()
        for k, v in read_st(path).items():
            n = k[len("wav2vec2."):] if k.startswith("wav2vec2.") else k
            if n.startswith(HEADS):
                continue
            n = n.replace(".parametrizations.weight.original0", ".weight_g")
            n = n.replace(".parametrizations.weight.original1", ".weight_v")
            assert n not in self.w, f"two tensors for {n}"
            self.w[n] = torch.from_numpy(v.astype(np.float64))

    def __call__(self, name, optional=False):
        if optional and name not in self.w:
            return None
        self.used.add(name)
        return self.w[name]

    def abs_sum(self):
        return sum(float(t.abs().sum()) for t in self.w.values())


def frame_length(n, cfg):
    for k, s in zip(cfg["conv_kernel"], cfg["conv_stride"]):
        n = (n - k) // s + 1
    return n


def layer_norm(x, w, prefix, eps):
    return F.layer_norm(x, (x.shape[-1],), w(prefix + ".weight"), w(prefix + ".bias"), eps)


def attention(x, w, p, heads, bias):
    B, T, H = x.shape
    dh = H // heads

    def split(t):
        return t.view(B, T, heads, dh).transpose(1, 2)
    q = split(F.linear(x, w(p + "q_proj.weight"), w(p + "q_proj.bias")) * dh ** -0.5)
    k = split(F.linear(x, w(p + "k_proj.weight"), w(p + "k_proj.bias")))
    v = split(F.linear(x, w(p + "v_proj.weight"), w(p + "v_proj.bias")))
    probs = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, T, H)
    return F.linear(ctx, w(p + "out_proj.weight"), w(p + "out_proj.bias"))


def feed_forward(x, w, p):
    h = F.gelu(F.linear(x, w(p + "intermediate_dense.weight"), w(p + "intermediate_dense.bias")))
    return F.linear(h, w(p + "output_dense.weight"), w(p + "output_dense.bias"))


def forward(cfg, w, x, am):
    eps = cfg["layer_norm_eps"]
    h = x[:, None, :]
    for i, stride in enumerate(cfg["conv_stride"]):
        p = f"feature_extractor.conv_layers.{i}."
        h = F.conv1d(h, w(p + "conv.weight"), w(p + "conv.bias", optional=True), stride=stride)
        if cfg["feat_extract_norm"] == "layer":
            h = F.layer_norm(h.transpose(1, 2), (h.shape[1],), w(p + "layer_norm.weight"), w(p + "layer_norm.bias"), 1e-5).transpose(1, 2)
        elif i == 0:
            h = F.group_norm(h, h.shape[1], w(p + "layer_norm.weight"), w(p + "layer_norm.bias"), 1e-5)
        h = F.gelu(h)
    h = h.transpose(1, 2)
    h = layer_norm(h, w, "feature_projection.layer_norm", eps)
    h = F.linear(h, w("feature_projection.projection.weight"), w("feature_projection.projection.bias"))
    B, Fn, H = h.shape
    lengths = [frame_length(int(am[b].sum()), cfg) for b in range(B)]
    fmask = torch.zeros(B, Fn, dtype=torch.bool)
    for b, n in enumerate(lengths):
        fmask[b, :n] = True
    h = h.masked_fill(~fmask[:, :, None], 0.0)
    bias = (1.0 - fmask.to(torch.float64))[:, None, None, :] * torch.finfo(torch.float64).min

    g, v = w("encoder.pos_conv_embed.conv.weight_g"), w("encoder.pos_conv_embed.conv.weight_v")
    weight = g * v / v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt()
    K = cfg["num_conv_pos_embeddings"]
    pos = F.conv1d(h.transpose(1, 2), weight, w("encoder.pos_conv_embed.conv.bias"), padding=K // 2,
                   groups=cfg["num_conv_pos_embedding_groups"])
    if K % 2 == 0:
        pos = pos[:, :, :-1]
    h = h + F.gelu(pos).transpose(1, 2)

    heads, stable = cfg["num_attention_heads"], cfg["do_stable_layer_norm"]
    if not stable:
        h = layer_norm(h, w, "encoder.layer_norm", eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layers.{i}."
        if stable:
            h = h + attention(layer_norm(h, w, p + "layer_norm", eps), w, p + "attention.", heads, bias)
            h = h + feed_forward(layer_norm(h, w, p + "final_layer_norm", eps), w, p + "feed_forward.")
        else:
            h = layer_norm(h + attention(h, w, p + "attention.", heads, bias), w, p + "layer_norm", eps)
            h = layer_norm(h + feed_forward(h, w, p + "feed_forward."), w, p + "final_layer_norm", eps)
    if stable:
        h = layer_norm(h, w, "encoder.layer_norm", eps)
    return h, lengths


def main(indir, out):
    tensors, meta = {}, {}
    for name in sorted(os.listdir(indir)):
        d = os.path.join(indir, name)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        assert cfg["model_type"] == "wav2vec2" and cfg["feat_extract_activation"] == "gelu" and cfg["hidden_act"] == "gelu"
        w = Weights(os.path.join(d, "model.safetensors"))
        inp = read_st(os.path.join(d, "input.safetensors"))
        x = torch.from_numpy(inp["input_values"].astype(np.float64))
        am = torch.from_numpy(inp["attention_mask"].astype(np.int64))
        with torch.no_grad():
            h, lengths = forward(cfg, w, x, am)
        unused = set(w.w) - w.used
        assert not unused, f"{name}: tensors not used by the forward: {sorted(unused)}"
        tensors[name + ".last_hidden_state"] = h.numpy().astype(np.float32)
        tensors[name + ".frame_lengths"] = np.array(lengths, dtype=np.int64)
        meta[name + ".input_abs_sum"] = repr(float(np.abs(inp["input_values"].astype(np.float64)).sum()))
        meta[name + ".param_abs_sum"] = repr(w.abs_sum())
        print(f"{name}: last_hidden_state {tuple(h.shape)}, frame lengths {lengths}")
    write_st(out, tensors, meta)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
