# Generates functional_oracle.json: PyTorch 1.13 reference outputs and input gradients
# (of sum(out * gw), float64) for the nn.functional ops the golden set does not cover.
# Run: /usr/bin/python3 functional_oracle.py
import json, math
import torch
import torch.nn.functional as F

torch.manual_seed(0)
cases = []

def r(*shape, scale=1.0):
    # float32-representable inputs so the float32 torchts run sees the same numbers
    return (torch.randn(*shape) * scale).float().double()

def fl(t):
    # JSON has no inf/nan: encode them as strings
    return [v if math.isfinite(v) else str(v) for v in t.flatten().double().tolist()]

def add(name, fn, inputs, grad=None, code=""):
    ins = {k: v.clone() for k, v in inputs.items()}
    grad = [k for k, v in ins.items() if v.is_floating_point()] if grad is None else grad
    for k in grad:
        ins[k].requires_grad_(True)
    outs = fn(**ins)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    gws = [torch.randn(o.shape).double() if o.is_floating_point() else None for o in outs]
    rec = {"name": name, "code": code, "inputs": {}, "outputs": [], "grads": {}}
    for k, v in inputs.items():
        rec["inputs"][k] = {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""), "data": fl(v),
                            "grad": k in grad}
    for o, gw in zip(outs, gws):
        rec["outputs"].append({"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""),
                               "data": fl(o.detach()), "gw": None if gw is None else fl(gw)})
    if grad:
        loss = sum((o * gw).sum() for o, gw in zip(outs, gws) if gw is not None and o.requires_grad)
        loss.backward()
        for k in grad:
            g = ins[k].grad
            rec["grads"][k] = None if g is None else fl(g)
    cases.append(rec)

edge = torch.tensor([-30., -4., -3., -1., -0.5, 0., 0.5, 1., 3., 4., 30., 2.5]).double()
xa = torch.cat([edge, r(12, scale=3)])
add("relu6", lambda x: F.relu6(x * 2), {"x": xa})
add("elu", lambda x: F.elu(x, 1.5), {"x": xa})
add("celu", lambda x: F.celu(x, 0.7), {"x": xa})
add("selu", lambda x: F.selu(x), {"x": xa})
add("mish", lambda x: F.mish(x), {"x": xa})
add("hardtanh", lambda x: F.hardtanh(x, -0.5, 1.0), {"x": xa})
add("sigmoid", lambda x: torch.sigmoid(x), {"x": xa})
add("tanh", lambda x: torch.tanh(x), {"x": xa})
add("logsigmoid", lambda x: F.logsigmoid(x), {"x": xa})
add("hardswish", lambda x: F.hardswish(x), {"x": xa})
add("hardsigmoid", lambda x: F.hardsigmoid(x), {"x": xa})
add("softsign", lambda x: F.softsign(x), {"x": xa})
add("tanhshrink", lambda x: F.tanhshrink(x), {"x": xa})
add("threshold", lambda x: F.threshold(x, 0.5, -2.0), {"x": xa})
add("relu", lambda x: F.relu(x), {"x": xa})
add("leaky_relu_default", lambda x: F.leaky_relu(x), {"x": xa})
add("gelu_edge", lambda x: F.gelu(x), {"x": xa})
add("softplus_edge", lambda x: F.softplus(x), {"x": xa})
add("glu", lambda x: F.glu(x, 1), {"x": r(3, 6)})
add("softmin", lambda x: F.softmin(x, 1), {"x": r(3, 5)})
big = torch.tensor([[1000., -1000., 0., 5.], [-float("inf"), 1., 2., 3.]]).double()
add("softmax_big", lambda x: F.softmax(x, -1), {"x": big})
add("log_softmax_big", lambda x: F.log_softmax(x, -1), {"x": big})

# losses
a, b = r(4, 5), r(4, 5)
add("l1_loss", lambda a, b: F.l1_loss(a, b), {"a": a, "b": b})
add("l1_loss_sum", lambda a, b: F.l1_loss(a, b, reduction="sum"), {"a": a, "b": b})
add("smooth_l1_loss", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), {"a": a, "b": b})
add("smooth_l1_loss_none", lambda a, b: F.smooth_l1_loss(a, b, reduction="none"), {"a": a, "b": b})
add("huber_loss", lambda a, b: F.huber_loss(a, b, delta=0.7), {"a": a, "b": b})
p = torch.sigmoid(r(4, 3)); t = torch.rand(4, 3).double(); bw = torch.rand(4, 3).double()
add("bce", lambda p, t: F.binary_cross_entropy(p, t), {"p": p, "t": t}, grad=["p"])
add("bce_weight_sum", lambda p, t, w: F.binary_cross_entropy(p, t, weight=w, reduction="sum"), {"p": p, "t": t, "w": bw}, grad=["p"])
z = r(4, 3, scale=4); pw = torch.tensor([0.5, 2.0, 3.0]).double()
add("bce_logits", lambda z, t: F.binary_cross_entropy_with_logits(z, t), {"z": z, "t": t}, grad=["z", "t"])
add("bce_logits_pw", lambda z, t, w, pw: F.binary_cross_entropy_with_logits(z, t, weight=w, pos_weight=pw, reduction="none"),
    {"z": z, "t": t, "w": bw, "pw": pw}, grad=["z"])
lp = F.log_softmax(r(3, 4), -1); tp = F.softmax(r(3, 4), -1)
add("kl_div_batchmean", lambda lp, tp: F.kl_div(lp, tp, reduction="batchmean"), {"lp": lp, "tp": tp}, grad=["lp"])
logits = r(5, 4); tgt = torch.tensor([0, 3, -100, 1, 2]); cw = torch.tensor([1.0, 2.0, 0.5, 1.5]).double()
add("ce_weight_ls_ignore", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.3), {"x": logits, "t": tgt, "w": cw}, grad=["x"])
add("ce_weight_ls_none", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.3, reduction="none"), {"x": logits, "t": tgt, "w": cw}, grad=["x"])
add("ce_probs_ls_weight", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.2), {"x": logits[:3], "t": tp, "w": cw}, grad=["x"])
add("ce_unbatched", lambda x, t: F.cross_entropy(x, t), {"x": r(4), "t": torch.tensor(2)}, grad=["x"])
add("nll_3d_none", lambda x, t: F.nll_loss(x, t, reduction="none", ignore_index=1), {"x": r(2, 3, 4), "t": torch.tensor([[0, 1, 2, 2], [1, 0, 0, 2]])}, grad=["x"])

# conv / pool
add("conv1d_same", lambda x, w, b: F.conv1d(x, w, b, padding="same"), {"x": r(2, 3, 7), "w": r(4, 3, 4), "b": r(4)})
add("conv2d_valid_unbatched", lambda x, w: F.conv2d(x, w, padding="valid", stride=(1, 2)), {"x": r(2, 5, 6), "w": r(3, 2, 2, 3)})
add("conv3d", lambda x, w, b: F.conv3d(x, w, b, padding=1, stride=2), {"x": r(1, 2, 4, 4, 3), "w": r(2, 2, 3, 3, 3), "b": r(2)})
add("conv_transpose1d", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2), {"x": r(2, 2, 4), "w": r(2, 3, 3), "b": r(3)})
add("conv_transpose2d_asym", lambda x, w: F.conv_transpose2d(x, w, stride=(2, 1), padding=(1, 0), groups=2, dilation=(1, 2)), {"x": r(1, 4, 3, 3), "w": r(4, 1, 3, 2)})
add("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), {"x": r(2, 3, 8)})
add("avg_pool1d_ceil", lambda x: F.avg_pool1d(x, 3, stride=2, ceil_mode=True), {"x": r(2, 3, 8)})
add("max_pool2d_dil", lambda x: F.max_pool2d(x, 2, stride=1, dilation=2), {"x": r(1, 2, 5, 6)})
add("max_pool2d_indices", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True), {"x": r(1, 2, 5, 6)})
add("avg_pool2d_ceil_excl", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), {"x": r(1, 2, 6, 5)})
add("avg_pool2d_ceil_incl", lambda x: F.avg_pool2d(x, 2, stride=2, padding=1, ceil_mode=True), {"x": r(1, 2, 6, 5)})
add("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=3), {"x": r(1, 1, 4, 4)})
add("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 3), {"x": r(2, 2, 7)})
add("adaptive_avg_pool2d_up", lambda x: F.adaptive_avg_pool2d(x, (5, 2)), {"x": r(1, 2, 3, 4)})

# norms
rm0, rv0 = r(3), torch.rand(3).double() + 0.5
def bn3(x, rm, rv):
    rm, rv = rm.clone(), rv.clone()
    return F.batch_norm(x, rm, rv, training=True, momentum=0.3, eps=1e-3), rm, rv
add("batch_norm_3d_noaffine", bn3, {"x": r(4, 3, 5), "rm": rm0, "rv": rv0}, grad=["x"])
add("group_norm_noaffine", lambda x: F.group_norm(x, 2, eps=1e-4), {"x": r(2, 4, 3)})
add("instance_norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b), {"x": r(2, 3, 4, 2), "w": r(3), "b": r(3)})
add("layer_norm_noweight", lambda x, b: F.layer_norm(x, (4,), None, b), {"x": r(3, 4), "b": r(4)})
add("normalize", lambda x: F.normalize(x, p=2, dim=1), {"x": r(3, 4)})
add("normalize_zero_row", lambda x: F.normalize(x * torch.tensor([[1.], [0.], [1.]]).double(), p=3, dim=1, eps=1e-3), {"x": r(3, 4)})
add("normalize_p1_dim0", lambda x: F.normalize(x, p=1, dim=0), {"x": r(3, 4)})
add("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=1), {"a": r(4, 5), "b": r(4, 5)})
add("cosine_similarity_bcast", lambda a, b: F.cosine_similarity(a, b, dim=-1), {"a": r(2, 1, 5), "b": r(3, 5)})
add("pairwise_distance", lambda a, b: F.pairwise_distance(a, b), {"a": r(4, 5), "b": r(4, 5)})

# pad / interpolate / misc
add("pad_circular", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), {"x": r(1, 2, 3, 4)})
add("pad_replicate_1d", lambda x: F.pad(x, (3, 1), mode="replicate"), {"x": r(2, 2, 4)})
add("pad_reflect_3d", lambda x: F.pad(x, (1, 1, 1, 0, 0, 2), mode="reflect"), {"x": r(1, 1, 3, 3, 3)})
add("pad_constant_3dims", lambda x: F.pad(x, (1, 0, 0, 1, 2, 0), value=-1.5), {"x": r(2, 2, 3)})
add("interp_nearest_x2", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), {"x": r(1, 2, 3, 4)})
add("interp_nearest_size", lambda x: F.interpolate(x, size=(5, 3), mode="nearest"), {"x": r(1, 1, 3, 4)})
add("interp_nearest_1d", lambda x: F.interpolate(x, size=7), {"x": r(2, 1, 3)})
add("interp_bilinear", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False), {"x": r(1, 2, 3, 4)})
add("interp_bilinear_ac", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True), {"x": r(1, 1, 3, 3)})
add("interp_linear_down", lambda x: F.interpolate(x, size=3, mode="linear"), {"x": r(1, 2, 7)})
add("one_hot", lambda t: F.one_hot(t, 5), {"t": torch.tensor([[0, 3], [4, 1]])}, grad=[])
add("one_hot_auto", lambda t: F.one_hot(t), {"t": torch.tensor([2, 0, 1])}, grad=[])
add("embedding_neg_pad", lambda i, w: F.embedding(i, w, padding_idx=-1), {"i": torch.tensor([[0, 4, 2], [4, 4, 1]]), "w": r(5, 3)}, grad=["w"])
add("linear", lambda x, w, b: F.linear(x, w, b), {"x": r(2, 3, 4), "w": r(5, 4), "b": r(5)})

def sdpa(q, k, v, mask=None, causal=False, scale=None):
    L, S = q.shape[-2], k.shape[-2]
    sc = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(S - L), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v
add("sdpa_float_mask_scale", lambda q, k, v, m: sdpa(q, k, v, mask=m, scale=0.3), {"q": r(2, 3, 4), "k": r(2, 5, 4), "v": r(2, 5, 2), "m": r(3, 5)}, grad=["q", "k", "v"])
add("sdpa_gqa_noncausal", lambda q, k, v: sdpa(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)), {"q": r(1, 6, 2, 4), "k": r(1, 2, 3, 4), "v": r(1, 2, 3, 4)})

json.dump({"generator": "functional_oracle.py (PyTorch %s, float64)" % torch.__version__, "cases": cases},
          open(__file__.replace(".py", ".json"), "w"), separators=(",", ":"))
print(len(cases), "cases")
