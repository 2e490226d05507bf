"""Markdown table from one or more run.py JSON files (later files win for the same model
and variant): python bench/zoo/table.py [--rss] RESULTS.json [MORE.json ...]
--rss adds the quantizer's peak RSS (MB) after the quantize time."""
import json
import sys


def fmt_db(x):
    if x is None:
        return "-"
    if x == float("inf"):
        return "inf"
    return "%.1f" % x


def main(paths):
    rss = "--rss" in paths
    paths = [p for p in paths if p != "--rss"]
    models = {}
    heads = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        heads.append("%s: %s, onnxruntime %s, calib %s samples, onnxq %s" % (
            p, r.get("cpu"), r.get("onnxruntime"), r.get("calib_n"), r.get("onnxq_commit", "?")))
        for name, m in r["models"].items():
            d = models.setdefault(name, {"eval_samples": m.get("eval_samples"), "variants": {}})
            d["variants"].update(m.get("variants", {}))
    for h in heads:
        print("<!-- %s -->" % h)
    print("| model | variant | task metric | value | worst slice | dB | other slices (dB) | "
          "quantize s | %sMB | q/float |" % ("peak RSS MB | " if rss else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if rss else ""))
    for name, m in models.items():
        for v, x in m["variants"].items():
            if "error" in x:
                print("| %s | %s | %s | | | | | | | |%s" % (name, v, x["error"][:80],
                                                           " |" if rss else ""))
                continue
            sq = x["sqnr_db"]
            w = x["worst"]
            others = ", ".join("%s %s" % (k, fmt_db(s)) for k, s in sq.items() if k != w)
            # ort_quant.py's note: quant_pre_process left out (the peers' notes are settings)
            note = (" (no pre-process)" if v.startswith("ort") and x["quantize"].get("note")
                    else "")
            mem = "%.0f | " % x["quantize"]["max_rss_mb"] if rss else ""
            print("| %s | %s%s | %s | %.4f | %s | %s | %s | %.1f | %s%.2f | %.2f |" % (
                name, v, note, x["task"]["name"], x["task"]["value"], w, fmt_db(sq[w]), others,
                x["quantize"]["qtime_s"], mem, x["size_mb"], x["q_over_float"]))


if __name__ == "__main__":
    main(sys.argv[1:])
