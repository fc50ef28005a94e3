import torch, math, json
import torch.nn as nn
def vals(n, k): return [round(math.sin(i*0.37 + k)*0.5, 6) for i in range(n)]
def T(shape, k):
    n = 1
    for s in shape: n *= s
    return torch.tensor(vals(n, k)).reshape(shape)
def setp(m, k0=10.0):
    with torch.no_grad():
        for i, (name, p) in enumerate(m.named_parameters()):
            p.copy_(T(list(p.shape), k0 + i))
R = {}
r8 = lambda t: [float('%.8g' % v) for v in t.detach().flatten().tolist()]
# Linear
m = nn.Linear(4, 3); setp(m); x = T([2, 5, 4], 1.0); R["linear"] = r8(m(x))
# Conv2d
m = nn.Conv2d(2, 3, 3, stride=2, padding=1, dilation=1, groups=1); setp(m); x = T([2, 2, 5, 6], 2.0); R["conv2d"] = r8(m(x)); R["conv2d_shape"] = list(m(x).shape)
m = nn.Conv2d(4, 4, (2, 3), padding="same", groups=2, dilation=(1, 2)); setp(m); x = T([1, 4, 4, 5], 2.5); R["conv2d_same"] = r8(m(x))
# LayerNorm
m = nn.LayerNorm([3, 4], eps=1e-5); setp(m); x = T([2, 3, 4], 3.0) * 3; R["layernorm"] = r8(m(x))
# BatchNorm2d train then eval
m = nn.BatchNorm2d(3, momentum=0.2); setp(m); x = T([4, 3, 2, 2], 4.0) * 2 + 0.3
y = m(x); R["bn_train"] = r8(y); y2 = m(x * 0.5 + 1); R["bn_train2"] = r8(y2)
R["bn_rm"] = r8(m.running_mean); R["bn_rv"] = r8(m.running_var); R["bn_nbt"] = int(m.num_batches_tracked)
m.eval(); R["bn_eval"] = r8(m(x))
# BatchNorm1d momentum=None (cumulative average)
m = nn.BatchNorm1d(3, momentum=None); x = T([5, 3], 4.5)
m(x); m(x * 2); R["bn1d_cma_rm"] = r8(m.running_mean); R["bn1d_cma_rv"] = r8(m.running_var)
# MHA
m = nn.MultiheadAttention(8, 2, batch_first=True); setp(m)
q = T([2, 3, 8], 5.0); k = T([2, 4, 8], 6.0); v = T([2, 4, 8], 7.0)
mask = torch.tensor([[False, False, False, True], [False, False, False, False]])
out, w = m(q, k, v, key_padding_mask=mask); R["mha_out"] = r8(out); R["mha_w"] = r8(w)
am = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)
out, w = m(q, q, q, attn_mask=am, average_attn_weights=False); R["mha_self_causal"] = r8(out); R["mha_self_causal_w"] = r8(w)
# TransformerEncoderLayer post-norm relu and pre-norm gelu (dropout 0)
for nf, act in [(False, "relu"), (True, "gelu")]:
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=act, norm_first=nf, batch_first=True); setp(m, 20.0)
    R[f"tel_{nf}_{act}"] = r8(m(T([2, 3, 8], 8.0)))
    R["tel_names"] = [n for n, _ in m.named_parameters()]
# Bilinear, EmbeddingBag
m = nn.Bilinear(3, 2, 4); setp(m); R["bilinear"] = r8(m(T([5, 3], 1.5), T([5, 2], 2.5)))
m = nn.EmbeddingBag(6, 3, mode="sum"); setp(m); inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0]); off = torch.tensor([0, 2, 2, 5])
R["ebag_sum"] = r8(m(inp, off)); m.mode = "mean"; R["ebag_mean"] = r8(m(inp, off)); m.mode = "max"; R["ebag_max"] = r8(m(inp, off))
R["ebag_sum_psw"] = r8(nn.functional.embedding_bag(inp, m.weight, off, mode="sum", per_sample_weights=T([8], 3.3)))
# GroupNorm, RMSNorm-like manual, ConvTranspose2d, Conv1d
m = nn.GroupNorm(2, 4); setp(m); R["groupnorm"] = r8(m(T([2, 4, 3], 9.0)))
m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1); setp(m); y = m(T([1, 2, 3, 3], 9.5)); R["convT"] = r8(y); R["convT_shape"] = list(y.shape)
m = nn.Conv1d(2, 4, 3, padding=1); setp(m); R["conv1d"] = r8(m(T([2, 2, 5], 10.5)))
# losses
x = T([4, 5], 11.0) * 3; t = torch.tensor([1, 0, 4, 2])
R["ce"] = nn.CrossEntropyLoss(label_smoothing=0.1)(x, t).item()
R["nll"] = nn.NLLLoss(reduction="sum")(torch.log_softmax(x, 1), t).item()
R["mse"] = nn.MSELoss()(x, T([4, 5], 12.0)).item()
R["l1"] = nn.L1Loss()(x, T([4, 5], 12.0)).item()
R["bce"] = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1., 2., 3., 0.5, 1.]))(x, (T([4, 5], 13.0) > 0).float()).item()
# clip grad norm
a = T([3, 4], 14.0).requires_grad_(); b = T([5], 15.0).requires_grad_()
((a * 3) ** 2).sum().backward(); (b * 7).sum().backward()
tn = torch.nn.utils.clip_grad_norm_([a, b], 1.5); R["clip_total"] = tn.item(); R["clip_a"] = r8(a.grad); R["clip_b"] = r8(b.grad)
a.grad = None; ((a * 3) ** 2).sum().backward()
R["clip_inf_total"] = torch.nn.utils.clip_grad_norm_([a], 2.0, norm_type=float("inf")).item(); R["clip_inf_a"] = r8(a.grad)
print(json.dumps(R))
