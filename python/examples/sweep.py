"""100 task sets (the RM-vs-EDF recipe, 4 CPUs, R = 0.9), each simulated for 2 s under global and
partitioned EDF on a Dask cluster; one DataFrame of miss ratios (None where no partition fits).
Point Client() at a scheduler address to run the same code on a real cluster (docs/python.md)."""
import pacer, pandas as pd
from dask.distributed import Client, LocalCluster

def miss_ratio(ts, policy):
    try:
        r = pacer.simulate(ts, cpus=4, policy=policy, duration="2s", jobs=False)
    except pacer.PacerError:  # p-edf: the tasks fit on no partition (worst-fit decreasing)
        return {"seed": ts.seed, "policy": policy, "miss_ratio": None}
    return {"seed": ts.seed, "policy": policy, "miss_ratio": r.miss_ratio}

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
        sets = pacer.generate(100, recipe="rm-vs-edf", cpus=4, r=0.9, seed=1)
        futures = [client.submit(miss_ratio, ts, p, pure=False) for ts in sets for p in ("g-edf", "p-edf")]
        df = pd.DataFrame(client.gather(futures))
    print(df.groupby("policy")["miss_ratio"].agg(["size", "count", "mean", "max"]))
