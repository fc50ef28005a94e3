import torch, math, json
torch.set_default_dtype(torch.float32)
def vals(n, k): return [round(math.sin(i*0.37 + k)*0.5, 6) for i in range(n)]
def problem():
    W = torch.tensor(vals(6, 1.0)).reshape(3, 2).requires_grad_()
    b = torch.tensor(vals(3, 2.0)).requires_grad_()
    x = torch.tensor(vals(8, 3.0)).reshape(4, 2)
    y = torch.tensor(vals(12, 4.0)).reshape(4, 3)
    return W, b, x, y
cases = {
 "sgd_plain": ("SGD", dict(lr=0.1)),
 "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
 "sgd_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05)),
 "sgd_maximize": ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
 "adam": ("Adam", dict(lr=0.05)),
 "adam_wd_amsgrad": ("Adam", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, amsgrad=True)),
 "adamw": ("AdamW", dict(lr=0.05)),
 "adamw_amsgrad": ("AdamW", dict(lr=0.05, weight_decay=0.2, amsgrad=True, maximize=False)),
 "rmsprop": ("RMSprop", dict(lr=0.01)),
 "rmsprop_centered_momentum": ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=0.1)),
 "adagrad": ("Adagrad", dict(lr=0.1)),
 "adagrad_decay": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2)),
}
out = {}
for name, (cls, kw) in cases.items():
    W, b, x, y = problem()
    opt = getattr(torch.optim, cls)([W, b], **kw)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = ((x @ W.T + b - y) ** 2).mean()
        losses.append(loss.item())
        loss.backward()
        opt.step()
    out[name] = dict(W=W.detach().flatten().tolist(), b=b.detach().tolist(), losses=losses)
print(json.dumps(out))
