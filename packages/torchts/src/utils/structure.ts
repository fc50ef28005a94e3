// A counter bumped by every change to any nn.Module's registered parameters, buffers or
// children, so torch.compile's guards can reuse a module's parameter list between calls instead
// of walking the whole tree every call (a decode step's guard check walked ~110 parameters).
export const moduleStructure = { version: 0 };
