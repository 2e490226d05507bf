"""Static quantization of the PaddleOCR text direction classifier with onnxruntime, written
as onnxruntime's own example (onnxruntime-inference-examples, quantization/image_classification/cpu:
run.py and resnet50_data_reader.py): a CalibrationDataReader over preprocessed samples, one
quantize_static call, then a latency check of both models in onnxruntime.
onnxq_static.py is this file with its import line and its call line changed (docs/python.md).

usage: python ort_static.py --input_model cls.onnx --output_model cls_int8.onnx --calibrate_dataset DIR
(DIR: one subfolder per sample holding x.npy, as models/make_text_images.py writes cls/tensors)
"""
import argparse
import os
import time

import numpy as np
import onnxruntime
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
import onnxq


def _preprocess_samples(folder: str, size_limit=0):
    """The samples of a folder, in name order (the images are already preprocessed: 3x48x192)."""
    names = sorted(os.listdir(folder))
    if size_limit > 0 and len(names) >= size_limit:
        names = names[:size_limit]
    return [np.load(os.path.join(folder, n, "x.npy")) for n in names]


class PaddleClsDataReader(CalibrationDataReader):
    def __init__(self, calibration_image_folder: str, model_path: str):
        self.enum_data = None
        # Use inference session to get input shape.
        session = onnxruntime.InferenceSession(model_path, None)
        self.nchw_data_list = _preprocess_samples(calibration_image_folder, size_limit=0)
        self.input_name = session.get_inputs()[0].name
        self.datasize = len(self.nchw_data_list)

    def get_next(self):
        if self.enum_data is None:
            self.enum_data = iter([{self.input_name: nchw_data} for nchw_data in self.nchw_data_list])
        return next(self.enum_data, None)

    def rewind(self):
        self.enum_data = None


def benchmark(model_path, sample):
    session = onnxruntime.InferenceSession(model_path)
    input_name = session.get_inputs()[0].name
    total = 0.0
    runs = 10
    session.run([], {input_name: sample})  # warming up
    for _ in range(runs):
        start = time.perf_counter()
        session.run([], {input_name: sample})
        total += time.perf_counter() - start
    print(f"Avg: {total / runs * 1000:.2f}ms")


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_model", required=True, help="input model")
    parser.add_argument("--output_model", required=True, help="output model")
    parser.add_argument("--calibrate_dataset", default="./test_images", help="calibration data set")
    parser.add_argument("--quant_format", default=QuantFormat.QDQ, type=QuantFormat.from_string,
                        choices=list(QuantFormat))
    parser.add_argument("--per_channel", default=False, type=bool)
    return parser.parse_args()


def main():
    args = get_args()
    input_model_path = args.input_model
    output_model_path = args.output_model
    calibration_dataset_path = args.calibrate_dataset
    dr = PaddleClsDataReader(calibration_dataset_path, input_model_path)

    # Calibrate and quantize model
    onnxq.quantize(input_model_path, output_model_path, dr)
    print("Calibrated and quantized model saved.")

    sample = _preprocess_samples(calibration_dataset_path, size_limit=1)[0]
    print("benchmarking fp32 model...")
    benchmark(input_model_path, sample)
    print("benchmarking int8 model...")
    benchmark(output_model_path, sample)


if __name__ == "__main__":
    main()
