"""Generates the PyTorch reference fixtures for encoder/reference_test.go.

usage: /usr/bin/python3 gen_reference.py   (PyTorch CPU + numpy; writes ./tiny-bert and ./tiny-roberta)

Each directory holds config.json, model.safetensors (task-model names with the bert./roberta. prefix and
extra head tensors, as real hub checkpoints) and reference.safetensors with input_ids, token_type_ids,
attention_mask and last_hidden_state computed by a line-for-line re-statement of transformers'
BertModel / RobertaModel forward (eval mode) in torch.nn.functional: word + position + token type
embeddings, LayerNorm, extended attention mask (1 - mask) * finfo.min, per-head softmax(QK^T/sqrt(dh)),
post-LN residual blocks, exact erf GELU. The RoBERTa weights are stored as float16 (the reference uses the
float16-rounded values) and its position ids follow create_position_ids_from_input_ids.
"""
import json, os, struct
import numpy as np
import torch
import torch.nn.functional as F

DT = {np.dtype('float32'): 'F32', np.dtype('float16'): 'F16', np.dtype('int64'): 'I64'}


def write(path, tensors, metadata=None):
    header, off, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        b = arr.tobytes()
        header[name] = {"dtype": DT[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for b in blobs: f.write(b)


def make(dirname, model_type, store_dtype):
    torch.manual_seed(0 if model_type == "bert" else 1)
    cfg = dict(model_type=model_type, vocab_size=23, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=20, type_vocab_size=2 if model_type == "bert" else 1,
               pad_token_id=0 if model_type == "bert" else 1, layer_norm_eps=1e-12 if model_type == "bert" else 1e-5,
               hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, hidden_act="gelu", initializer_range=0.02)
    H, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    w = {}
    def p(name, *shape, scale=0.3, offset=0.0):
        w[name] = (torch.randn(*shape) * scale + offset)
    p("embeddings.word_embeddings.weight", V, H)
    p("embeddings.position_embeddings.weight", cfg["max_position_embeddings"], H)
    p("embeddings.token_type_embeddings.weight", cfg["type_vocab_size"], H)
    p("embeddings.LayerNorm.weight", H, scale=0.2, offset=1.0); p("embeddings.LayerNorm.bias", H, scale=0.1)
    for l in range(L):
        q = f"encoder.layer.{l}."
        for n in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]:
            p(q + n + ".weight", H, H); p(q + n + ".bias", H, scale=0.1)
        p(q + "attention.output.LayerNorm.weight", H, scale=0.2, offset=1.0); p(q + "attention.output.LayerNorm.bias", H, scale=0.1)
        p(q + "intermediate.dense.weight", I, H); p(q + "intermediate.dense.bias", I, scale=0.1)
        p(q + "output.dense.weight", H, I); p(q + "output.dense.bias", H, scale=0.1)
        p(q + "output.LayerNorm.weight", H, scale=0.2, offset=1.0); p(q + "output.LayerNorm.bias", H, scale=0.1)
    # Round to the storage dtype; the reference uses the stored values.
    w = {k: v.to(store_dtype).to(torch.float32) for k, v in w.items()}

    B, S, pad = 3, 7, cfg["pad_token_id"]
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(2, V, (B, S), generator=g)
    lengths = [7, 5, 3]
    mask = torch.zeros(B, S, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = pad
    tt = torch.zeros(B, S, dtype=torch.long)
    if cfg["type_vocab_size"] > 1:
        tt[:, 3:] = 1
    if model_type == "roberta":
        m = ids.ne(pad).long()
        pos = torch.cumsum(m, dim=1) * m + pad
    else:
        pos = torch.arange(S).expand(B, S)

    eps = cfg["layer_norm_eps"]
    ln = lambda x, n: F.layer_norm(x, (H,), w[n + ".weight"], w[n + ".bias"], eps)
    lin = lambda x, n: F.linear(x, w[n + ".weight"], w[n + ".bias"])
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][tt] \
        + w["embeddings.position_embeddings.weight"][pos]
    x = ln(x, "embeddings.LayerNorm")
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    nh, dh = cfg["num_attention_heads"], H // cfg["num_attention_heads"]
    heads = lambda t: t.view(B, S, nh, dh).permute(0, 2, 1, 3)
    for l in range(L):
        q = f"encoder.layer.{l}."
        Q, K, Vv = heads(lin(x, q + "attention.self.query")), heads(lin(x, q + "attention.self.key")), heads(lin(x, q + "attention.self.value"))
        scores = Q @ K.transpose(-1, -2) / (dh ** 0.5) + ext
        ctx = (torch.softmax(scores, dim=-1) @ Vv).permute(0, 2, 1, 3).reshape(B, S, H)
        a = ln(lin(ctx, q + "attention.output.dense") + x, q + "attention.output.LayerNorm")
        h = F.gelu(lin(a, q + "intermediate.dense"))
        x = ln(lin(h, q + "output.dense") + a, q + "output.LayerNorm")

    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    prefix = model_type + "."
    npdt = np.float16 if store_dtype == torch.float16 else np.float32
    tensors = {prefix + k: v.numpy().astype(npdt) for k, v in w.items()}
    tensors[prefix + "embeddings.position_ids"] = np.arange(cfg["max_position_embeddings"], dtype=np.int64)[None]
    if model_type == "bert":
        tensors["bert.pooler.dense.weight"] = np.zeros((H, H), np.float32)
        tensors["bert.pooler.dense.bias"] = np.zeros(H, np.float32)
        tensors["cls.predictions.bias"] = np.zeros(V, np.float32)
    else:
        tensors["lm_head.dense.weight"] = np.zeros((H, H), np.float16)
        tensors["lm_head.bias"] = np.zeros(V, np.float16)
    write(os.path.join(dirname, "model.safetensors"), tensors, {"format": "pt"})
    write(os.path.join(dirname, "reference.safetensors"), {
        "input_ids": ids.numpy().astype(np.int64), "token_type_ids": tt.numpy().astype(np.int64),
        "attention_mask": mask.numpy().astype(np.int64), "last_hidden_state": x.numpy().astype(np.float32)})


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    make(os.path.join(here, "tiny-bert"), "bert", torch.float32)
    make(os.path.join(here, "tiny-roberta"), "roberta", torch.float16)
