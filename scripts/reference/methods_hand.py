#!/usr/bin/env python3
"""Hand-computed 2-token cases for SPEC §8's mixing matrices (tests/fixtures/methods/hand.json).

Plain Python floats only (no torch, no numpy) for the expected values; `--check` rebuilds each
layer as a transformers BertLayer and runs methods_reference.py's mixing code on it, to show that
both readings of the weights agree.

Conventions (also in the JSON): row vectors, `y = x W + b` with W stored as [d_in][d_out]
(the transpose of torch's Linear.weight); heads split the projection's columns in order
(head h = columns h·dh .. (h+1)·dh − 1 of W_Q, W_K, W_V and rows of W_O); scores
(q_i · k_j) / sqrt(dh); LayerNorm(v) = γ ⊙ (v − mean v) / sqrt(var v + eps) + β with the
population variance; FFN(r) = gelu(r W_1 + b_1) W_2 + b_2 with the exact (erf) gelu; layer output
x̃_i = LN2(FFN(r_i) + r_i), r_i = LN1(z_i), z_i = Σ_h A^h_i· V^h W_O^h + b_O + x_i.
Every case has n = 2 tokens and d = 2; unless a case says otherwise W_Q = W_K = W_V = W_O = W_1 = W_2
= I, all biases 0, γ = 1, β = 0, eps = 1e-12, target t = 0.

Shared attention (cases attention, norm, alti, value-zeroing): X = [[1, 0], [0, 1]], 1 head (dh = 2),
W_Q = c·I with c = sqrt(2)·ln 3, W_K = I: scores = X W_Q (X W_K)ᵀ / sqrt(2) = ln 3 · I, so
A = softmax rows = [[3/4, 1/4], [1/4, 3/4]].

attention: M = A = [[0.75, 0.25], [0.25, 0.75]] (rows as they are).
  layer = M[0] = [0.75, 0.25]; P = rownorm(0.5·M + 0.5·I) = [[0.875, 0.125], [0.125, 0.875]];
  with one layer rollout = flow = P[0] = [0.875, 0.125].

norm: W_V = [[2, 0], [0, 1]], b_V = [1, 0]: f(x_0) = [2, 0] + [1, 0] = [3, 0],
  f(x_1) = [0, 1] + [1, 0] = [1, 1].  M[i][j] = A_ij ‖f(x_j)‖:
  M = [[0.75·3, 0.25·√2], [0.25·3, 0.75·√2]] = [[2.25, 0.353553…], [0.75, 1.060660…]].
  layer = N(M)[0] = [2.25, 0.353553] / 2.603553 = [0.864203…, 0.135797…];
  P = rownorm(0.5·N(M) + 0.5·I): P[0] = [0.932102…, 0.067898…] = rollout = flow.

alti: b_V = [2, 0] (W_V = W_O = I, b_O = 0), γ = [1, 2], β = [0.5, −0.5] (in y_i, LN1's output, as
  the authors' code has it; in no t_ij).
  f(x_0) = [3, 0], f(x_1) = [2, 1].
  z_00 = 0.75·[3, 0] + x_0 = [3.25, 0]      z_01 = 0.25·[2, 1] = [0.5, 0.25]
  z_10 = 0.25·[3, 0] = [0.75, 0]            z_11 = 0.75·[2, 1] + x_1 = [1.5, 1.75]
  With d = 2, z − mean(z) = [u, −u] with u = (z[0] − z[1]) / 2, so t_ij = (u_ij / σ_i)·[γ_0, −γ_1]
  and ‖y_i‖₁ − ‖y_i − t_ij‖₁ = (|U_i| − |U_i − u_ij|)·(γ_0 + γ_1)/σ_i, U_i = Σ_j u_ij,
  σ_i = sqrt(U_i² + eps).
  u_00 = 1.625, u_01 = 0.125, U_0 = 1.75, σ_0 ≈ 1.75: M_00 = 1.625·3/1.75 = 2.785714…,
  M_01 = 0.125·3/1.75 = 0.214286…
  That is without β; y_i = Σ_j t_ij + β = (U_i/σ_i)·[γ_0, −γ_1] + β. Row 0: y_0 = [1, −2] + β
  = [1.5, −2.5] and both t_0j point the same way, so β changes nothing there.
  u_10 = 0.375, u_11 = −0.125, U_1 = 0.25, σ_1 ≈ 0.25: y_1 = [1.5, −2.5], ‖y_1‖₁ = 4,
  t_10 = [1.5, −3], t_11 = [−0.5, 1]: M_10 = 4 − ‖[0, 0.5]‖₁ = 3.5,
  M_11 = max(0, 4 − ‖[2, −3.5]‖₁) = max(0, −1.5) = 0.
  layer = N(M)[0] = [13/14, 1/14]; rollout = flow = N(M)[0] (residual inside, no α).

value-zeroing: b_V = [1, 0.5] (so f(x_0) = [2, 0.5], f(x_1) = [1, 1.5]), b_O = [0, 0],
  LN1: γ = [1, 1], β = [0.5, 0], eps = 1;  FFN: W_1 = W_2 = I, zero biases, gelu;
  LN2: γ = [2, 1], β = [0, 1], eps = 1.  For d = 2, LN(v) = β + γ ⊙ [u, −u] / sqrt(u² + eps),
  u = (v[0] − v[1]) / 2.  Unchanged: z_0 = 0.75·[2, 0.5] + 0.25·[1, 1.5] + [1, 0] = [2.75, 0.75],
  z_1 = 0.25·[2, 0.5] + 0.75·[1, 1.5] + [0, 1] = [1.25, 2.25].  Token j's value vector zeroed:
  z_0^{¬0} = 0.25·[1, 1.5] + [1, 0] = [1.25, 0.375], z_0^{¬1} = 0.75·[2, 0.5] + [1, 0] = [2.5, 0.375],
  z_1^{¬0} = 0.75·[1, 1.5] + [0, 1] = [0.75, 2.125], z_1^{¬1} = 0.25·[2, 0.5] + [0, 1] = [0.5, 1.125].
  Each goes through r = LN1(z), h = gelu(r) + r, x̃ = LN2(h), and M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i)
  (the numbers are in the JSON: "trace").

grad-attention: 2 heads of dh = 1. X = [[1, 0], [0, 1]], W_Q = ln 3 · I, W_K = I, so head 0 has
  scores [[ln 3, 0], [0, 0]] → A^0 = [[3/4, 1/4], [1/2, 1/2]] and head 1 scores [[0, 0], [0, ln 3]]
  → A^1 = [[1/2, 1/2], [1/4, 3/4]].  W_V = I, b_V = [1, 1], W_O = [[1, 0], [0, −1]]:
  f^0(x_j) = (x_j[0] + 1)·[1, 0]: f^0(x_0) = [2, 0], f^0(x_1) = [1, 0];
  f^1(x_j) = (x_j[1] + 1)·[0, −1]: f^1(x_0) = [0, −1], f^1(x_1) = [0, −2].
  Score s = w · z_t with w = [1, 1], t = 0 (z_0 = the attention block's output + residual at 0,
  LN1's input), so ∂s/∂A^h_0j = w · f^h(x_j) and ∂s/∂A^h_1j = 0:
  G^0 = [[2, 1], [0, 0]], G^1 = [[−1, −2], [0, 0]].
  M = mean_h max(0, G^h ⊙ A^h) = ([[1.5, 0.25], [0, 0]] + [[0, 0], [0, 0]]) / 2
    = [[0.75, 0.125], [0, 0]].
  layer = M[0] = [0.75, 0.125] (unnormalised); rollout: R_1 = I + M, R_1[0] = [1.75, 0.125],
  / 1.875 = [0.933333…, 0.066667…]; flow on P = rownorm(I + M): P[0] = the same.

Aggregation-only cases (2 layers, no model; M_1, M_2 given, target 0 and 1):
  M_1 = [[1, 3], [2, 2]], M_2 = [[3, 1], [0, 0]] (a zero row).
  norm-like (residual added):  N(M_1) = [[0.25, 0.75], [0.5, 0.5]], N(M_2) = [[0.75, 0.25], [0, 0]];
    P_l = rownorm(0.5·N(M_l) + 0.5·I): P_1 = [[0.625, 0.375], [0.25, 0.75]],
    P_2 = [[0.875, 0.125], [0, 1]] (the zero row becomes [0, 0.5], renormalised to [0, 1]).
    rollout: R_2 = P_2 P_1; flow at layer 2: F[j] = Σ_k min(P_2[t][k], P_1[k][j]) (two disjoint
    paths through the middle layer), normalised.
  alti-like (residual inside): P_l = N(M_l): P_2 keeps its zero row; from t = 1 rollout[2] = [0, 0]
    and flow[2] = [0, 0] (a zero total stays zero); layer[2] = [0, 0].
  grad-attention: R_0 = I, R_l = R_{l−1} + M_l R_{l−1}, rollout = R_l[t] normalised; flow on
    rownorm(I + M_l).
  attention (the rows sum to 1 here: M_1 = [[0.5, 0.5], [0.2, 0.8]], M_2 = [[1, 0], [0.4, 0.6]]):
    P_l = rownorm(0.5·M_l + 0.5·I).
"""

import argparse
import json
import math
import os
import sys

LN3 = math.log(3.0)


# ------------------------------------------------------------------ plain-Python linear algebra


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def vecmat(v, W):
    return [sum(v[k] * W[k][j] for k in range(len(v))) for j in range(len(W[0]))]


def add(u, v):
    return [a + b for a, b in zip(u, v)]


def scale(c, v):
    return [c * a for a in v]


def eye(n):
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def rownorm(M):
    out = []
    for row in M:
        s = sum(row)
        out.append([x / s for x in row] if s != 0 else [0.0 for _ in row])
    return out


def gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def layer_norm(v, gamma, beta, eps):
    mean = sum(v) / len(v)
    var = sum((a - mean) ** 2 for a in v) / len(v)
    sigma = math.sqrt(var + eps)
    return [g * (a - mean) / sigma + b for a, g, b in zip(v, gamma, beta)]


def softmax(row):
    m = max(row)
    e = [math.exp(a - m) for a in row]
    s = sum(e)
    return [a / s for a in e]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# ------------------------------------------------------------------ the tiny layer


def defaults(d=2):
    I = eye(d)
    z = [0.0] * d
    return {"heads": 1, "W_Q": I, "b_Q": z, "W_K": I, "b_K": z, "W_V": I, "b_V": z, "W_O": I, "b_O": z,
            "ln1": {"gamma": [1.0] * d, "beta": z, "eps": 1e-12},
            "ffn": {"W_1": I, "b_1": z, "activation": "gelu", "W_2": I, "b_2": z},
            "ln2": {"gamma": [1.0] * d, "beta": z, "eps": 1e-12}}


def cols(W, lo, hi):
    return [row[lo:hi] for row in W]


def attention_probs(c, X):
    H = c["heads"]
    Q = [add(vecmat(x, c["W_Q"]), c["b_Q"]) for x in X]
    K = [add(vecmat(x, c["W_K"]), c["b_K"]) for x in X]
    dh = len(Q[0]) // H
    A = []
    for h in range(H):
        q = [v[h * dh:(h + 1) * dh] for v in Q]
        k = [v[h * dh:(h + 1) * dh] for v in K]
        A.append([softmax([sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(dh) for j in range(len(X))])
                  for i in range(len(X))])
    return A


def head_values(c, X, zero=None):
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h; `zero` = position whose value vector is zeroed."""
    H = c["heads"]
    V = [add(vecmat(x, c["W_V"]), c["b_V"]) for x in X]
    if zero is not None:
        V[zero] = [0.0] * len(V[zero])
    dh = len(V[0]) // H
    return [[vecmat(v[h * dh:(h + 1) * dh], c["W_O"][h * dh:(h + 1) * dh]) for v in V] for h in range(H)]


def z_terms(c, X, A, f, bias=True):
    """z_ij, with b_O on the diagonal unless `bias` is False (ALTI's parts hold none)."""
    n, d, H = len(X), len(X[0]), c["heads"]
    z = [[[sum(A[h][i][j] * f[h][j][k] for h in range(H)) for k in range(d)] for j in range(n)] for i in range(n)]
    for i in range(n):
        z[i][i] = add(z[i][i], add(X[i], c["b_O"]) if bias else X[i])
    return z


def layer_output(c, X, A, zero=None, trace=None):
    f = head_values(c, X, zero)
    z = z_terms(c, X, A, f)
    out = []
    for i in range(len(X)):
        zi = [sum(col) for col in zip(*z[i])]
        r = layer_norm(zi, c["ln1"]["gamma"], c["ln1"]["beta"], c["ln1"]["eps"])
        ffn = c["ffn"]
        hid = [gelu(a) for a in add(vecmat(r, ffn["W_1"]), ffn["b_1"])]
        h = add(add(vecmat(hid, ffn["W_2"]), ffn["b_2"]), r)
        o = layer_norm(h, c["ln2"]["gamma"], c["ln2"]["beta"], c["ln2"]["eps"])
        if trace is not None:
            trace.append({"i": i, "zeroed": zero, "z": zi, "ln1": r, "ffn_plus_residual": h, "output": o})
        out.append(o)
    return out


def mixing(c, X, kind, score_w=None, t=0):
    A = attention_probs(c, X)
    n, H = len(X), c["heads"]
    extra = {"attention": A}
    if kind == "attention":
        M = [[sum(A[h][i][j] for h in range(H)) / H for j in range(n)] for i in range(n)]
    elif kind == "norm":
        f = head_values(c, X)
        M = [[math.sqrt(sum(sum(A[h][i][j] * f[h][j][k] for h in range(H)) ** 2 for k in range(len(X[0]))))
              for j in range(n)] for i in range(n)]
    elif kind == "alti":
        f = head_values(c, X)
        z = z_terms(c, X, A, f, bias=False)
        gamma, beta, eps, bo = c["ln1"]["gamma"], c["ln1"]["beta"], c["ln1"]["eps"], c["b_O"]
        M = []
        for i in range(n):
            zi = add([sum(col) for col in zip(*z[i])], bo)
            mu = sum(zi) / len(zi)
            sigma = math.sqrt(sum((a - mu) ** 2 for a in zi) / len(zi) + eps)
            t_ij = []
            for j in range(n):
                m = sum(z[i][j]) / len(z[i][j])
                t_ij.append([g * (a - m) / sigma for a, g in zip(z[i][j], gamma)])
            # y_i: LN1's output, with b_O and β, which no t_ij holds.
            mb = sum(bo) / len(bo)
            rest = [g * (b - mb) / sigma + be for g, b, be in zip(gamma, bo, beta)]
            y = add([sum(col) for col in zip(*t_ij)], rest)
            ny = sum(abs(a) for a in y)
            M.append([max(0.0, ny - sum(abs(a - b) for a, b in zip(y, t_ij[j]))) for j in range(n)])
    elif kind == "value-zeroing":
        trace = []
        base = layer_output(c, X, A, None, trace)
        M = [[0.0] * n for _ in range(n)]
        for j in range(n):
            pert = layer_output(c, X, A, j, trace)
            for i in range(n):
                M[i][j] = 1.0 - cosine(pert[i], base[i])
        extra["trace"] = trace
    elif kind == "grad-attention":
        f = head_values(c, X)
        G = [[[sum(w * a for w, a in zip(score_w, f[h][j])) if i == t else 0.0 for j in range(n)]
              for i in range(n)] for h in range(H)]
        M = [[sum(max(0.0, G[h][i][j] * A[h][i][j]) for h in range(H)) / H for j in range(n)] for i in range(n)]
        extra["gradient"] = G
    else:
        raise ValueError(kind)
    return M, extra


# ------------------------------------------------------------------ aggregations (plain Python)


def propagation(kind, Ms):
    n = len(Ms[0])
    I = eye(n)
    if kind == "grad-attention":
        return [rownorm([add(I[i], M[i]) for i in range(n)]) for M in Ms]
    if kind in ("alti", "value-zeroing"):
        return [rownorm(M) for M in Ms]
    normed = Ms if kind == "attention" else [rownorm(M) for M in Ms]
    return [rownorm([add(scale(0.5, M[i]), scale(0.5, I[i])) for i in range(n)]) for M in normed]


def max_flow(P, l, t, j):
    """Max flow from (l, t) to (0, j) in the layered graph, by augmenting paths (Edmonds-Karp)
    on the explicit residual network; exact for these tiny graphs."""
    n = len(P[0])
    nodes = [(a, i) for a in range(l + 1) for i in range(n)]
    cap = {}
    for a in range(1, l + 1):
        for i in range(n):
            for k in range(n):
                cap[((a, i), (a - 1, k))] = cap.get(((a, i), (a - 1, k)), 0.0) + P[a - 1][i][k]
                cap.setdefault(((a - 1, k), (a, i)), 0.0)
    src, dst = (l, t), (0, j)
    total = 0.0
    while True:
        prev = {src: None}
        queue = [src]
        while queue and dst not in prev:
            u = queue.pop(0)
            for v in nodes:
                if v not in prev and cap.get((u, v), 0.0) > 0.0:
                    prev[v] = u
                    queue.append(v)
        if dst not in prev:
            return total
        path = []
        v = dst
        while prev[v] is not None:
            path.append((prev[v], v))
            v = prev[v]
        b = min(cap[e] for e in path)
        for u, v in path:
            cap[(u, v)] -= b
            cap[(v, u)] += b
        total += b


def aggregate(kind, Ms, t):
    n = len(Ms[0])
    P = propagation(kind, Ms)
    if kind in ("attention", "grad-attention"):
        layer = [list(M[t]) for M in Ms]
    else:
        layer = [rownorm(M)[t] for M in Ms]
    roll = []
    if kind == "grad-attention":
        R = eye(n)
        for M in Ms:
            MR = matmul(M, R)
            R = [add(R[i], MR[i]) for i in range(n)]
            s = sum(R[t])
            roll.append([x / s for x in R[t]])
    else:
        R = None
        for Pl in P:
            R = [list(r) for r in Pl] if R is None else matmul(Pl, R)
            roll.append(list(R[t]))
    flow = []
    for l in range(1, len(Ms) + 1):
        F = [max_flow(P, l, t, j) for j in range(n)]
        flow.append(rownorm([F])[0])
    return {"layer": layer, "rollout": roll, "flow": flow, "propagation": P}


# ------------------------------------------------------------------ the cases


def cases():
    X = [[1.0, 0.0], [0.0, 1.0]]
    c_att = math.sqrt(2.0) * LN3
    shared_q = [[c_att, 0.0], [0.0, c_att]]
    out = []

    c = defaults()
    c.update(W_Q=shared_q)
    out.append(("attention", c, None))

    c = defaults()
    c.update(W_Q=shared_q, W_V=[[2.0, 0.0], [0.0, 1.0]], b_V=[1.0, 0.0])
    out.append(("norm", c, None))

    c = defaults()
    c.update(W_Q=shared_q, b_V=[2.0, 0.0])
    c["ln1"] = {"gamma": [1.0, 2.0], "beta": [0.5, -0.5], "eps": 1e-12}
    out.append(("alti", c, None))

    c = defaults()
    c.update(W_Q=shared_q, b_V=[1.0, 0.5])
    c["ln1"] = {"gamma": [1.0, 1.0], "beta": [0.5, 0.0], "eps": 1.0}
    c["ln2"] = {"gamma": [2.0, 1.0], "beta": [0.0, 1.0], "eps": 1.0}
    out.append(("value-zeroing", c, None))

    c = defaults()
    c.update(heads=2, W_Q=[[LN3, 0.0], [0.0, LN3]], b_V=[1.0, 1.0], W_O=[[1.0, 0.0], [0.0, -1.0]])
    out.append(("grad-attention", c, [1.0, 1.0]))
    return X, out


def aggregation_cases():
    general = ([[1.0, 3.0], [2.0, 2.0]], [[3.0, 1.0], [0.0, 0.0]])
    stochastic = ([[0.5, 0.5], [0.2, 0.8]], [[1.0, 0.0], [0.4, 0.6]])
    rows = []
    for kind, Ms in (("attention", stochastic), ("norm", general), ("alti", general),
                     ("value-zeroing", general), ("grad-attention", general)):
        for t in (0, 1):
            agg = aggregate(kind, [list(map(list, M)) for M in Ms], t)
            rows.append({"name": f"aggregate-{kind}-t{t}", "mixing": kind, "target": t,
                         "matrices": [list(map(list, M)) for M in Ms], "expected": agg})
    return rows


def build():
    X, cs = cases()
    out = []
    for kind, c, w in cs:
        M, extra = mixing(c, X, kind, score_w=w, t=0)
        agg = aggregate(kind, [M], 0)
        case = {"name": f"layer-{kind}", "mixing": kind, "n": 2, "d": 2, "X": X, **c, "target": 0,
                "attention": extra["attention"]}
        if w is not None:
            case["score"] = {"description": "s = w · z_t, z_t = LN1's input at t (attention block output + b_O + residual)",
                             "w": w, "target": 0}
            case["gradient"] = extra["gradient"]
        if "trace" in extra:
            case["trace"] = extra["trace"]
        case["expected"] = {"matrix": M, **agg}
        out.append(case)
    return {
        "description": "SPEC §8 hand cases: see scripts/reference/methods_hand.py for the arithmetic",
        "convention": ("row vectors, y = x W + b with W as [d_in][d_out] (torch Linear.weight transposed); "
                       "head h = columns h*dh..(h+1)*dh-1 of W_Q/W_K/W_V and rows of W_O; scores q·k/sqrt(dh); "
                       "LayerNorm with population variance; FFN(r) = gelu_erf(r W_1 + b_1) W_2 + b_2; "
                       "output = LN2(FFN(r) + r), r = LN1(z), z_i = sum_h A^h_i V^h W_O^h + b_O + x_i; "
                       "expected.matrix = M before row normalisation; expected.propagation = the matrices "
                       "rollout (except grad-attention's) and flow run on; alpha = 0.5"),
        "layers": out,
        "aggregations": aggregation_cases(),
    }


# ------------------------------------------------------------------ cross-check with transformers


def torch_check(doc):
    """Rebuild each hand layer as a BertLayer and recompute M with methods_reference.py."""
    import numpy as np
    import torch
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import methods_reference as mr

    worst = 0.0
    for case in doc["layers"]:
        kind = case["mixing"]
        ln_eps = case["ln1"]["eps"]
        if case["ln2"]["eps"] != ln_eps:
            raise SystemExit("torch check: a BertLayer has one eps")
        cfg = BertConfig(hidden_size=2, num_attention_heads=case["heads"], intermediate_size=2,
                         layer_norm_eps=ln_eps, hidden_act="gelu", attn_implementation="eager",
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        cfg._attn_implementation = "eager"
        layer = BertLayer(cfg).double().eval()

        def set_lin(lin, W, b):
            lin.weight.data = torch.tensor(W, dtype=torch.float64).T.contiguous()
            lin.bias.data = torch.tensor(b, dtype=torch.float64)

        def set_ln(ln, p):
            ln.weight.data = torch.tensor(p["gamma"], dtype=torch.float64)
            ln.bias.data = torch.tensor(p["beta"], dtype=torch.float64)

        a = layer.attention
        set_lin(a.self.query, case["W_Q"], case["b_Q"])
        set_lin(a.self.key, case["W_K"], case["b_K"])
        set_lin(a.self.value, case["W_V"], case["b_V"])
        set_lin(a.output.dense, case["W_O"], case["b_O"])
        set_ln(a.output.LayerNorm, case["ln1"])
        set_lin(layer.intermediate.dense, case["ffn"]["W_1"], case["ffn"]["b_1"])
        set_lin(layer.output.dense, case["ffn"]["W_2"], case["ffn"]["b_2"])
        set_ln(layer.output.LayerNorm, case["ln2"])
        parts = mr.LayerParts(layer, a.self.query, a.self.key, a.self.value, a.output.dense,
                              a.output.LayerNorm, case["heads"])
        X = torch.tensor(case["X"], dtype=torch.float64)
        probs = []
        h = a.self.register_forward_hook(lambda m, args, kw, out: probs.append(out[1]), with_kwargs=True)
        zin = []
        h2 = a.output.LayerNorm.register_forward_pre_hook(lambda m, args: zin.append(args[0]))
        A = None
        with torch.enable_grad():
            Xg = X[None].clone()
            layer(Xg)
        h.remove()
        h2.remove()
        A_t = probs[0]
        A = A_t[0].detach().numpy()
        Xn = X.numpy()
        f, bo = mr.head_values(parts, Xn)
        if kind == "attention":
            M = mr.mixing_attention(A)
        elif kind == "norm":
            M = mr.mixing_norm(A, f)
        elif kind == "alti":
            M, _ = mr.mixing_alti(mr.alti_terms(A, f, Xn), np.array(case["ln1"]["gamma"]),
                                  np.array(case["ln1"]["beta"]), bo, ln_eps)
        elif kind == "value-zeroing":
            M, _ = mr.mixing_value_zeroing(parts, X.float())
        else:
            t = case["score"]["target"]
            s = (torch.tensor(case["score"]["w"], dtype=torch.float64) * zin[0][0, t]).sum()
            G = torch.autograd.grad(s, A_t)[0][0].numpy()
            M = mr.mixing_grad(A, G)
        e = float(np.abs(np.array(M) - np.array(case["expected"]["matrix"])).max())
        worst = max(worst, e)
        print(f"hand {case['name']}: torch/methods_reference vs plain Python max diff {e:.1e}", file=sys.stderr)
        P = mr.propagation_matrices(kind, [np.array(case["expected"]["matrix"])])
        for key, val in (("rollout", mr.rollout(kind, [np.array(case["expected"]["matrix"])], P, 0)),
                         ("flow", mr.flow(P, 0))):
            e = float(np.abs(val - np.array(case["expected"][key])).max())
            worst = max(worst, e)
    for case in doc["aggregations"]:
        kind, t = case["mixing"], case["target"]
        Ms = [np.array(M) for M in case["matrices"]]
        P = mr.propagation_matrices(kind, Ms)
        got = {"layer": mr.layer_rows(kind, Ms, t), "rollout": mr.rollout(kind, Ms, P, t), "flow": mr.flow(P, t)}
        for key, val in got.items():
            e = float(np.abs(val - np.array(case["expected"][key])).max())
            worst = max(worst, e)
            if e > 1e-12:
                print(f"hand {case['name']}/{key}: differs by {e:.1e}", file=sys.stderr)
    # value-zeroing goes through a float32 X there: allow float32 input rounding (exact here).
    if worst > 1e-9:
        raise SystemExit(f"hand cases: torch cross-check differs by {worst:.1e}")
    print(f"hand cases: torch cross-check ok (max diff {worst:.1e})", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--check", action="store_true", help="cross-check against transformers' BertLayer")
    args = ap.parse_args()
    doc = build()
    if args.check:
        torch_check(doc)
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
