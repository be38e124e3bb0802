"""Self time per file of code, in µs per request, of two V8 CPU profiles (bench/profile.ts writes them).

    python3 bench/cpu-by-file.py <a.cpuprofile> <a requests> <b.cpuprofile> <b requests>

Prints the totals, then the files whose self time grew most from a to b, and those that shrank most.
Native frames (no file) are named by their function: "(garbage collector)", "HashTask", …
"""
import collections
import json
import re
import sys


def per_file(path, requests):
    profile = json.load(open(path))
    nodes = {node["id"]: node for node in profile["nodes"]}
    micros = collections.Counter()
    for sample, delta in zip(profile["samples"], profile["timeDeltas"]):
        micros[sample] += delta
    files = collections.Counter()
    for node, time in micros.items():
        frame = nodes[node]["callFrame"]
        url = re.sub(r"^file://", "", frame["url"])
        url = re.sub(r".*/node_modules/", "~/", url)
        url = re.sub(r"^/.*?/((?:src|adapters|bench|test)/)", r"\1", url)
        files[url or frame["functionName"]] += time / requests
    return files


a = per_file(sys.argv[1], float(sys.argv[2]))
b = per_file(sys.argv[3], float(sys.argv[4]))
print(f"{'µs per request':75} {'a':>7} {'b':>7} {'b - a':>7}")
print(f"{'total':75} {sum(a.values()):7.1f} {sum(b.values()):7.1f} {sum(b.values()) - sum(a.values()):+7.1f}")
order = sorted(set(a) | set(b), key=lambda name: -(b.get(name, 0) - a.get(name, 0)))
for name in order[:45]:
    print(f"{name[:75]:75} {a.get(name, 0):7.1f} {b.get(name, 0):7.1f} {b.get(name, 0) - a.get(name, 0):+7.1f}")
print("...")
for name in order[-15:]:
    print(f"{name[:75]:75} {a.get(name, 0):7.1f} {b.get(name, 0):7.1f} {b.get(name, 0) - a.get(name, 0):+7.1f}")
