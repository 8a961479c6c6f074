"""PyTorch peer of `nvdp pretrain --config bert-tiny` (docs/pretraining.md, "Checked against PyTorch").

usage: torch_mlm.py SEQS.json STEPS BATCH [THREADS]
SEQS.json comes from `go run ./scripts/mlmpeer` (the exact packed sequences nvdp trains on).
The model is BertForMaskedLM at the bert-tiny shape written with torch.nn (post-LN layers, GELU,
tied decoder, HF initialisation N(0, 0.02)); the recipe is nvdp pretrain's: 15% masking with
80/10/10, AdamW (weight decay 0.01 on matrices), lr 1e-3 with 6% linear warm-up and linear decay,
global gradient clipping at 1, dropout 0.1. Prints one JSON line per 100 steps with the held-out
MLM loss and masked-token accuracy.
"""
import json, sys, random, time, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
d = json.load(open(sys.argv[1]))
steps = int(sys.argv[2]); B = int(sys.argv[3]); lr = 1e-3
H, A, I, L, V = 128, 2, 512, 2, d['vocab_size']
special = set(d['special'] + [d['mask']]); MASK = d['mask']
torch.manual_seed(0); random.seed(0)
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.w = nn.Embedding(V, H, padding_idx=0); s.p = nn.Embedding(512, H); s.t = nn.Embedding(2, H); s.ln = nn.LayerNorm(H, eps=1e-12)
        s.layers = nn.ModuleList([nn.TransformerEncoderLayer(H, A, I, 0.1, activation='gelu', batch_first=True, layer_norm_eps=1e-12) for _ in range(L)])
        s.drop = nn.Dropout(0.1)
        s.dense = nn.Linear(H, H); s.hln = nn.LayerNorm(H, eps=1e-12); s.bias = nn.Parameter(torch.zeros(V))
        for m in s.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None: nn.init.zeros_(m.bias)
            if isinstance(m, nn.MultiheadAttention):
                nn.init.normal_(m.in_proj_weight, 0, 0.02); nn.init.zeros_(m.in_proj_bias)
        with torch.no_grad(): s.w.weight[0].zero_()
    def forward(s, ids, tys, pad, pos):
        x = s.drop(s.ln(s.w(ids) + s.p(torch.arange(ids.shape[1])) + s.t(tys)))
        for l in s.layers: x = l(x, src_key_padding_mask=pad)
        h = x.reshape(-1, H)[pos]
        h = s.hln(F.gelu(s.dense(h)))
        return h @ s.w.weight.t() + s.bias
def batch(seqs, tyss):
    S = max(map(len, seqs)); n = len(seqs)
    ids = torch.zeros(n, S, dtype=torch.long); tys = torch.zeros(n, S, dtype=torch.long); pad = torch.ones(n, S, dtype=torch.bool)
    pos, lab = [], []
    for r, (s, t) in enumerate(zip(seqs, tyss)):
        s = list(s); cand = [i for i, x in enumerate(s) if x not in special]
        k = max(1, round(0.15 * len(cand))); ch = sorted(random.sample(cand, k))
        for i in ch:
            pos.append(r * S + i); lab.append(s[i]); u = random.random()
            if u < 0.8: s[i] = MASK
            elif u < 0.9:
                while True:
                    j = random.randrange(V)
                    if j not in special: break
                s[i] = j
        ids[r, :len(s)] = torch.tensor(s); tys[r, :len(t)] = torch.tensor(t); pad[r, :len(s)] = False
    return ids, tys, pad, torch.tensor(pos), torch.tensor(lab)
m = M()
decay = [p for n, p in m.named_parameters() if p.dim() >= 2]; nod = [p for n, p in m.named_parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.01}, {'params': nod, 'weight_decay': 0.0}], lr=lr)
warm = int(0.06 * steps)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / max(1, warm) if s < warm else max(0.0, (steps - s) / max(1, steps - warm)))
held = [batch(d['held_ids'][i:i+B], d['held_types'][i:i+B]) for i in range(0, len(d['held_ids']), B)]
def evaluate():
    m.eval(); tl = tc = tn = 0
    with torch.no_grad():
        for ids, tys, pad, pos, lab in held:
            lo = m(ids, tys, pad, pos); tl += F.cross_entropy(lo, lab, reduction='sum').item(); tc += (lo.argmax(-1) == lab).sum().item(); tn += len(lab)
    m.train(); return tl / tn, tc / tn
order = list(range(len(d['train_ids']))); random.shuffle(order); k = 0; t0 = time.time()
for step in range(1, steps + 1):
    if k + B > len(order): random.shuffle(order); k = 0
    idx = order[k:k+B]; k += B
    ids, tys, pad, pos, lab = batch([d['train_ids'][i] for i in idx], [d['train_types'][i] for i in idx])
    loss = F.cross_entropy(m(ids, tys, pad, pos), lab)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step(); sched.step()
    if step % 100 == 0 or step == steps:
        hl, ha = evaluate(); print(json.dumps({"step": step, "train_loss": loss.item(), "held_loss": hl, "held_acc": ha, "s": time.time() - t0}), flush=True)
