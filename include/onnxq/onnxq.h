/* onnxq — umbrella header. */
#ifndef ONNXQ_H
#define ONNXQ_H

#define ONNXQ_VERSION_MAJOR 0
#define ONNXQ_VERSION_MINOR 1
#define ONNXQ_VERSION_PATCH 0
#define ONNXQ_VERSION_STRING "0.1.0"

#include "onnxq/status.h"
#include "onnxq/ir.h"
#include "onnxq/stats.h"
#include "onnxq/inspect.h"
#include "onnxq/quant.h"
#include "onnxq/image.h"
#include "onnxq/verify.h"
#include "onnxq/satcheck.h"
#include "onnxq/quantize.h"

#endif
