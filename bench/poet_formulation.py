#!/usr/bin/python3
"""POET's MILP exactly as tests/data/reference/README.md states the original
code's formulation (poet/poet_solver.py, PuLP): full T x T binaries,
aggregated triangle rows, two-sided Free_E rows, raw joules and bytes, the
repeated edge kept. Built with Debian's python3-pulp and solved by Debian's
CBC (COIN_CMD), the solver the original code uses. This is the peer that
bench/milp.py compares poet's milp planner with, in the same run.

usage: poet_formulation.py INSTANCE.json BUDGET_BYTES RUNTIME_FACTOR TIME_LIMIT_S [--paging 0|1] [--remat 0|1]
prints one JSON line: status, objective_j, seconds
"""
import json
import sys
import time

import pulp


def build(d, budget, factor, paging=True, remat=True):
    T = d["T"]
    nodes = d["nodes"]
    edges = [tuple(e) for e in d["edges"]]
    c = [n["compute_joules"] for n in nodes]
    pin = [n["pagein_joules"] for n in nodes]
    pout = [n["pageout_joules"] for n in nodes]
    tau = [n["cpu_cost_ms"] for n in nodes]
    m = [n["ram_bytes"] for n in nodes]
    succ = [set() for _ in range(T)]
    for u, v in edges:
        succ[u].add(v)
    rng = range(T)
    prob = pulp.LpProblem("poet", pulp.LpMinimize)
    B = lambda name: pulp.LpVariable.dicts(name, (rng, rng), cat="Binary")
    R, S, D, I, O = B("R"), B("SRam"), B("SSd"), B("MIn"), B("MOut")
    U = pulp.LpVariable.dicts("U", (rng, rng), lowBound=0, upBound=budget, cat="Continuous")
    F = pulp.LpVariable.dicts("Free_E", (rng, range(len(edges))), cat="Binary")
    prob += (pulp.lpSum(c[i] * R[t][i] for t in rng for i in rng)
             + pulp.lpSum(pin[i] * I[t][i] for t in rng for i in rng)
             + pulp.lpSum(pout[i] * O[t][i] for t in rng for i in rng))
    # 1-2: triangular structure as aggregated rows; stage t computes node t
    prob += pulp.lpSum(R[t][i] for t in rng for i in range(t + 1, T)) == 0
    prob += pulp.lpSum(S[t][i] for t in rng for i in range(t, T)) == 0
    prob += pulp.lpSum(D[t][i] for t in rng for i in range(t, T)) == 0
    prob += pulp.lpSum(I[t][i] for t in rng for i in range(t + 1, T)) == 0
    prob += pulp.lpSum(O[t][i] for t in rng for i in range(t + 1, T)) == 0
    prob += pulp.lpSum(R[t][t] for t in rng) == T
    # 3-6
    for t in rng:
        for u, v in edges:
            prob += R[t][v] <= R[t][u] + S[t][u]
    for t in range(T - 1):
        for i in rng:
            prob += S[t + 1][i] <= S[t][i] + R[t][i] + I[t][i]
            prob += D[t + 1][i] <= D[t][i] + O[t][i]
    for t in rng:
        for i in rng:
            prob += I[t][i] <= D[t][i]
            prob += O[t][i] <= S[t][i]
    # 7: free indicator
    for t in rng:
        for e, (i, k) in enumerate(edges):
            later = [j for j in succ[i] if j > k]
            h = 1 - R[t][k] + pulp.lpSum(R[t][j] for j in later)
            H = 1 + len(later)
            if t < T - 1:
                h = h + S[t + 1][i]
                H += 1
            prob += 1 - F[t][e] <= h
            prob += H * (1 - F[t][e]) >= h
    # 8-9: memory
    for t in rng:
        prob += U[t][0] == m[0] * R[t][0] + pulp.lpSum(m[i] * S[t][i] for i in rng)
        for k in range(T - 1):
            prob += U[t][k + 1] == U[t][k] + m[k + 1] * R[t][k + 1] - pulp.lpSum(
                m[i] * F[t][e] for e, (i, kk) in enumerate(edges) if kk == k)
    # 10: runtime
    prob += pulp.lpSum(tau[i] * R[t][i] for t in rng for i in rng) <= factor * sum(tau)
    # 11: variants
    if not paging:
        for t in rng:
            for i in rng:
                prob += I[t][i] == 0
                prob += O[t][i] == 0
                prob += D[t][i] == 0
    if not remat:
        for t in rng:
            for i in rng:
                prob += R[t][i] == (1 if t == i else 0)
    return prob


def main():
    path, budget, factor, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    opts = dict(zip(sys.argv[5::2], sys.argv[6::2]))
    d = json.load(open(path))
    start = time.monotonic()
    prob = build(d, budget, factor, opts.get("--paging", "1") == "1", opts.get("--remat", "1") == "1")
    built = time.monotonic()
    prob.solve(pulp.COIN_CMD(msg=False, timeLimit=limit))
    done = time.monotonic()
    status = pulp.LpStatus[prob.status]
    objective = pulp.value(prob.objective) if prob.status == 1 or prob.sol_status in (1, 2) else None
    print(json.dumps({"status": status, "sol_status": pulp.LpSolution[prob.sol_status], "objective_j": objective,
                      "build_seconds": built - start, "solve_seconds": done - built}))


if __name__ == "__main__":
    main()
