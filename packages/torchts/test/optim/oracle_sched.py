import torch, json, warnings
warnings.filterwarnings("ignore")
from torch.optim import lr_scheduler as L
def mk(cls=torch.optim.SGD, groups=None, **kw):
    p = torch.zeros(1, requires_grad=True)
    q = torch.zeros(1, requires_grad=True)
    if groups: return cls([{"params":[p], "lr":groups[0]}, {"params":[q], "lr":groups[1]}], **kw)
    return cls([p], **kw)
def seq(opt, sch, n, mom=False):
    out=[sch.get_last_lr()]; ms=[]
    for _ in range(n):
        opt.step(); sch.step(); out.append(sch.get_last_lr())
        if mom:
            g=opt.param_groups[0]; ms.append(g["betas"][0] if "betas" in g else g["momentum"])
    return (out, ms) if mom else out
R={}
o=mk(groups=[0.1,0.01], lr=0.1); R["step"]=seq(o, L.StepLR(o, 3, 0.5), 10)
o=mk(lr=0.1); R["multistep"]=seq(o, L.MultiStepLR(o, [2,5,5,8], 0.1), 10)
o=mk(lr=0.1); R["exp"]=seq(o, L.ExponentialLR(o, 0.9), 8)
o=mk(lr=0.1); R["cos"]=seq(o, L.CosineAnnealingLR(o, 5, 0.01), 15)
o=mk(lr=0.1); R["linear"]=seq(o, L.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4), 7)
o=mk(lr=0.1); R["lambda"]=seq(o, L.LambdaLR(o, lambda e: 0.95**e), 6)
o=mk(lr=0.1, momentum=0.9); R["onecycle_sgd"]=seq(o, L.OneCycleLR(o, max_lr=1.0, total_steps=10), 9, True)
o=mk(torch.optim.Adam, lr=0.1); R["onecycle_adam3"]=seq(o, L.OneCycleLR(o, max_lr=0.5, total_steps=12, three_phase=True, anneal_strategy="linear", pct_start=0.25), 11, True)
o=mk(lr=1.0); s1=L.LinearLR(o, start_factor=0.1, total_iters=3); s2=L.ExponentialLR(o, 0.9); R["sequential"]=seq(o, L.SequentialLR(o, [s1,s2], milestones=[3]), 10)
o=mk(lr=1.0); s1=L.ConstantLR(o, factor=0.5, total_iters=2); s2=L.CosineAnnealingLR(o, 4); R["sequential_cos"]=seq(o, L.SequentialLR(o, [s1,s2], milestones=[2]), 8)
print(json.dumps(R))
