#!/usr/bin/python3
"""Small single-operator models that tests/ort_ops.js runs in onnxq and in
onnxruntime-node. They cover operators and attribute combinations that the ONNX
backend test data does not (or barely) exercise. Regenerate with:
    /usr/bin/python3 tests/ort_ops/make_models.py tests/ort_ops
Each model has float32 inputs only; the runner feeds seeded random data."""
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

out = sys.argv[1] if len(sys.argv) > 1 else '.'
rng = np.random.RandomState(0)


def save(name, nodes, inputs, outputs, inits=(), opset=17, domains=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    ops = [helper.make_opsetid('', opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    onnx.save(m, f'{out}/{name}.onnx')


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def w(name, shape, scale=0.5):
    return numpy_helper.from_array((rng.randn(*shape) * scale).astype(np.float32), name)


# convolutions
save('conv_dil_groups_asym', [helper.make_node('Conv', ['x', 'w', 'b'], ['y'], group=2,
     dilations=[2, 1], strides=[1, 2], pads=[1, 0, 2, 1])],
     [vi('x', [2, 4, 11, 13])], [vi('y', None)], [w('w', [6, 2, 3, 3]), w('b', [6])])
save('conv_same_lower_3d', [helper.make_node('Conv', ['x', 'w'], ['y'], auto_pad='SAME_LOWER',
     strides=[2, 1, 2])], [vi('x', [1, 3, 5, 6, 7])], [vi('y', None)], [w('w', [4, 3, 2, 3, 3])])
save('conv_depthwise_stride2', [helper.make_node('Conv', ['x', 'w', 'b'], ['y'], group=8,
     strides=[2, 2], pads=[2, 2, 2, 2], kernel_shape=[5, 5])],
     [vi('x', [1, 8, 17, 16])], [vi('y', None)], [w('w', [8, 1, 5, 5]), w('b', [8])])
save('convtranspose_groups_outpad', [helper.make_node('ConvTranspose', ['x', 'w', 'b'], ['y'],
     group=2, strides=[2, 3], output_padding=[1, 2], pads=[1, 0, 0, 1], dilations=[1, 2])],
     [vi('x', [1, 4, 5, 6])], [vi('y', None)], [w('w', [4, 3, 3, 2]), w('b', [6])])
# pooling
save('avgpool_ceil_include_pad', [helper.make_node('AveragePool', ['x'], ['y'], kernel_shape=[3, 3],
     strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)],
     [vi('x', [1, 3, 10, 9])], [vi('y', None)])
save('maxpool_dilated_ceil', [helper.make_node('MaxPool', ['x'], ['y'], kernel_shape=[2, 3],
     strides=[2, 2], dilations=[2, 1], ceil_mode=1)], [vi('x', [2, 2, 11, 10])], [vi('y', None)])
save('lppool_p3', [helper.make_node('LpPool', ['x'], ['y'], kernel_shape=[3, 2], strides=[1, 2],
     pads=[1, 0, 1, 0], p=3)], [vi('x', [1, 2, 7, 8])], [vi('y', None)], opset=18)
# normalisation
save('groupnorm_18', [helper.make_node('GroupNormalization', ['x', 's', 'b'], ['y'], num_groups=3,
     epsilon=1e-3)], [vi('x', [2, 6, 5, 4])], [vi('y', None)], [w('s', [3]), w('b', [3])], opset=18)
save('instancenorm', [helper.make_node('InstanceNormalization', ['x', 's', 'b'], ['y'])],
     [vi('x', [2, 5, 7, 3])], [vi('y', None)], [w('s', [5]), w('b', [5])])
save('layernorm_axis1', [helper.make_node('LayerNormalization', ['x', 's', 'b'], ['y'], axis=1)],
     [vi('x', [3, 4, 5])], [vi('y', None)], [w('s', [4, 5]), w('b', [4, 5])])
# resize
for mode, ctm, nm in [('linear', 'half_pixel', None), ('linear', 'align_corners', None),
                      ('linear', 'pytorch_half_pixel', None),
                      ('nearest', 'asymmetric', 'floor'), ('nearest', 'half_pixel', 'round_prefer_ceil')]:
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
    if nm:
        attrs['nearest_mode'] = nm
    if ctm == 'align_corners':
        # with `scales`, the ONNX reference divides by in*scale (10.2) where onnxruntime
        # divides by the output length (10); `sizes` makes both the same
        sizes = numpy_helper.from_array(np.array([1, 2, 10, 6], dtype=np.int64), 'sizes')
        save(f'resize_{mode}_{ctm}', [helper.make_node('Resize', ['x', '', '', 'sizes'], ['y'],
             **attrs)], [vi('x', [1, 2, 6, 10])], [vi('y', None)], [sizes], opset=13)
        continue
    scales = numpy_helper.from_array(np.array([1, 1, 1.7, 0.6], dtype=np.float32), 'scales')
    save(f'resize_{mode}_{ctm}', [helper.make_node('Resize', ['x', '', 'scales'], ['y'], **attrs)],
         [vi('x', [1, 2, 6, 10])], [vi('y', None)], [scales], opset=13)
# matmul / gemm with broadcasting and transposes
save('matmul_bcast', [helper.make_node('MatMul', ['a', 'b'], ['y'])],
     [vi('a', [2, 1, 5, 7]), vi('b', [3, 7, 4])], [vi('y', None)])
save('gemm_trans_bias_row', [helper.make_node('Gemm', ['a', 'b', 'c'], ['y'], transA=1, transB=1,
     alpha=0.7, beta=1.3)], [vi('a', [6, 5]), vi('b', [4, 6])], [vi('y', None)], [w('c', [1, 4])])
# softmax at the old opset: flattened to 2-D at axis
save('softmax_opset11_axis1', [helper.make_node('Softmax', ['x'], ['y'], axis=1)],
     [vi('x', [2, 3, 4])], [vi('y', None)], opset=11)
# activations
save('hardswish_hardsigmoid', [helper.make_node('HardSigmoid', ['x'], ['h'], alpha=0.3, beta=0.4),
     helper.make_node('HardSwish', ['h'], ['y'])], [vi('x', [4, 50])], [vi('y', None)], opset=14)

# com.microsoft quantized operators
MS = [('com.microsoft', 1)]
for op in ['QLinearAdd', 'QLinearMul']:
    init = [numpy_helper.from_array(np.array(v, dtype=dt), n) for v, dt, n in
            [(0.05, np.float32, 'as'), (7, np.uint8, 'az'), (0.03, np.float32, 'bs'),
             (200, np.uint8, 'bz'), (0.09 if op == 'QLinearAdd' else 0.5, np.float32, 'cs'),
             (120, np.uint8, 'cz')]]
    save(f'ms_{op.lower()}_bcast', [helper.make_node(op, ['a', 'as', 'az', 'b', 'bs', 'bz', 'cs', 'cz'],
         ['y'], domain='com.microsoft')], [vi('a', [2, 3, 4], TensorProto.UINT8),
         vi('b', [3, 1], TensorProto.UINT8)], [vi('y', None, TensorProto.UINT8)], init, domains=MS)
K, N, blk = 64, 24, 32
nb = K // blk
q = rng.randint(0, 16, size=(N, nb, blk)).astype(np.uint8)
packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)          # [N, nb, blk/2]
zps = rng.randint(0, 16, size=(N, nb)).astype(np.uint8)
zp_packed = (zps[:, 0::2] | (zps[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
save('ms_matmulnbits_4bit', [helper.make_node('MatMulNBits', ['a', 'b', 's', 'z'], ['y'],
     domain='com.microsoft', K=K, N=N, bits=4, block_size=blk)], [vi('a', [3, K])], [vi('y', None)],
     [numpy_helper.from_array(packed, 'b'), w('s', [N * nb], 0.05),
      numpy_helper.from_array(zp_packed, 'z')], domains=MS)
# RoiAlign, max mode and a fixed sampling ratio (rois and batch indices are constants)
rois = numpy_helper.from_array(np.array([[0.5, 1.0, 6.3, 7.9], [2.0, 0.2, 9.5, 5.0],
                                         [-1.0, -1.0, 3.0, 2.0]], dtype=np.float32), 'rois')
bidx = numpy_helper.from_array(np.array([0, 1, 1], dtype=np.int64), 'bidx')
save('roialign_max_ratio2', [helper.make_node('RoiAlign', ['x', 'rois', 'bidx'], ['y'], mode='max',
     output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.9)],
     [vi('x', [2, 3, 10, 12])], [vi('y', None)], [rois, bidx], opset=16)
# data movement and elementwise corner cases
def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


save('slice_negative_steps', [helper.make_node('Slice', ['x', 'st', 'en', 'ax', 'sp'], ['y'])],
     [vi('x', [5, 7, 6])], [vi('y', None)],
     [i64('st', [-1, 5, 0]), i64('en', [-6, 0, 100]), i64('ax', [0, -2, 2]), i64('sp', [-2, -3, 2])],
     opset=13)
for mode in ['reflect', 'edge', 'constant']:
    save(f'pad_{mode}', [helper.make_node('Pad', ['x', 'p', 'v'], ['y'], mode=mode)],
         [vi('x', [2, 3, 4, 5])], [vi('y', None)],
         [i64('p', [0, 1, 2, 3, 0, 2, 1, 0]), numpy_helper.from_array(np.array(0.5, np.float32), 'v')],
         opset=13)
save('split_uneven_18', [helper.make_node('Split', ['x'], ['a', 'b', 'c'], axis=1, num_outputs=3)],
     [vi('x', [2, 8, 3])], [vi('a', None), vi('b', None), vi('c', None)], opset=18)
save('transpose_5d_concat_neg', [helper.make_node('Transpose', ['x'], ['t'], perm=[4, 2, 0, 3, 1]),
     helper.make_node('Concat', ['t', 't'], ['y'], axis=-2)], [vi('x', [2, 3, 4, 5, 6])], [vi('y', None)])
save('where_expand_bcast', [helper.make_node('Greater', ['a', 'b'], ['c']),
     helper.make_node('Where', ['c', 'a', 'b'], ['w']),
     helper.make_node('Expand', ['w', 'shp'], ['y'])],
     [vi('a', [3, 1, 4]), vi('b', [2, 1])], [vi('y', None)], [i64('shp', [2, 1, 2, 1])])
save('reduce_keepdims0_argmax_last', [helper.make_node('ReduceMean', ['x'], ['m'], axes=[-1, 1], keepdims=0),
     helper.make_node('ArgMax', ['x'], ['i'], axis=2, select_last_index=1, keepdims=0),
     helper.make_node('Cast', ['i'], ['y2'], to=TensorProto.FLOAT),
     helper.make_node('Identity', ['m'], ['y1'])],
     [vi('x', [3, 4, 5, 2])], [vi('y1', None), vi('y2', None)], opset=13)
save('activations_mix', [helper.make_node('LeakyRelu', ['x'], ['a'], alpha=0.2),
     helper.make_node('PRelu', ['a', 'slope'], ['b']), helper.make_node('Erf', ['b'], ['c']),
     helper.make_node('Sigmoid', ['c'], ['d']), helper.make_node('Elu', ['d'], ['e'], alpha=0.7),
     helper.make_node('Clip', ['e', 'lo'], ['y'])], [vi('x', [2, 3, 4, 4])], [vi('y', None)],
     [w('slope', [3, 1, 1]), numpy_helper.from_array(np.array(0.55, np.float32), 'lo')], opset=13)
save('gemm_scalar_c_matmul_1d', [helper.make_node('Gemm', ['a', 'b', 'c'], ['g']),
     helper.make_node('MatMul', ['v', 'g'], ['y'])], [vi('a', [4, 6]), vi('b', [6, 5]), vi('v', [4])],
     [vi('y', None)], [numpy_helper.from_array(np.array(0.25, np.float32), 'c')], opset=13)
save('softmax13_axis1_logsoftmax', [helper.make_node('Softmax', ['x'], ['s'], axis=1),
     helper.make_node('LogSoftmax', ['s'], ['y'], axis=-1)], [vi('x', [2, 5, 3, 4])], [vi('y', None)], opset=13)
save('gelu_tanh_20', [helper.make_node('Gelu', ['x'], ['y'], approximate='tanh')],
     [vi('x', [3, 40])], [vi('y', None)], opset=20)
save('instnorm_lrn_depthtospace', [helper.make_node('LRN', ['x'], ['l'], size=3, alpha=0.001, beta=0.6, bias=1.5),
     helper.make_node('DepthToSpace', ['l'], ['y'], blocksize=2, mode='CRD')], [vi('x', [1, 8, 3, 5])],
     [vi('y', None)], opset=13)
save('convtranspose_autopad_same', [helper.make_node('ConvTranspose', ['x', 'w'], ['y'], strides=[2, 2],
     auto_pad='SAME_UPPER')], [vi('x', [1, 3, 5, 4])], [vi('y', None)], [w('w', [3, 2, 3, 3])], opset=13)
# Pad: wrap (opset 19), negative pads (crops) next to positive ones, a 1-D input
save('pad_wrap_19', [helper.make_node('Pad', ['x', 'p'], ['y'], mode='wrap')],
     [vi('x', [2, 3, 4, 5])], [vi('y', None)], [i64('p', [0, 1, 2, 3, 0, 2, 1, 4])], opset=19)
for mode in ['constant', 'reflect', 'edge']:
    save(f'pad_negative_{mode}', [helper.make_node('Pad', ['x', 'p'], ['y'], mode=mode)],
         [vi('x', [3, 6, 7])], [vi('y', None)], [i64('p', [-1, 2, -2, 1, -3, 3])], opset=13)
save('pad_1d_axes_18', [helper.make_node('Pad', ['x', 'p', 'v', 'a'], ['y'], mode='constant')],
     [vi('x', [9])], [vi('y', None)],
     [i64('p', [3, 2]), numpy_helper.from_array(np.array(-1.5, np.float32), 'v'), i64('a', [-1])], opset=18)
# bicubic Resize of the last two axes (a ViT's position-embedding interpolation: 37x37 ->
# 16x16 and up), with onnxruntime's default A and PyTorch's (-0.75) and exclude_outside
for name, attrs, sizes in (('resize_cubic_down', dict(mode='cubic'), [1, 6, 16, 16]),
                           ('resize_cubic_up_excl', dict(mode='cubic', cubic_coeff_a=-0.5, exclude_outside=1),
                            [2, 3, 23, 19])):
    save(name, [helper.make_node('Resize', ['x', '', '', 'sizes'], ['y'], **attrs)],
         [vi('x', [1 if name.endswith('down') else 2, 6 if name.endswith('down') else 3, 37, 11])],
         [vi('y', None)], [i64('sizes', sizes)], opset=13)
# opset 23 transformer operators (torch's dynamo exporter writes Attention from opset 23)
def save23(name, nodes, inputs, outputs, inits=(), opset=23):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 10
    onnx.save(m, f'{out}/{name}.onnx')


# 4-D, grouped-query (4 q heads, 2 kv heads), causal with a past of 3, an additive mask
# over the total length, all four outputs (qk after the mask)
save23('attention_gqa_causal_past_23', [helper.make_node(
    'Attention', ['q', 'k', 'v', 'm', 'pk', 'pv'], ['y', 'present_k', 'present_v', 'qk'],
    is_causal=1, qk_matmul_output_mode=2)],
    [vi('q', [2, 4, 5, 8]), vi('k', [2, 2, 5, 8]), vi('v', [2, 2, 5, 6]), vi('m', [5, 8]),
     vi('pk', [2, 2, 3, 8]), vi('pv', [2, 2, 3, 6])],
    [vi('y', None), vi('present_k', None), vi('present_v', None), vi('qk', None)])
# 3-D with head counts, an explicit scale and softcap, a 4-D mask broadcast over heads
save23('attention_3d_softcap_23', [helper.make_node(
    'Attention', ['q', 'k', 'v', 'm'], ['y'], q_num_heads=3, kv_num_heads=3, scale=0.2, softcap=2.5)],
    [vi('q', [2, 4, 12]), vi('k', [2, 7, 12]), vi('v', [2, 7, 9]), vi('m', [2, 1, 4, 7])], [vi('y', None)])
save23('rmsnorm_axis1_23', [helper.make_node('RMSNormalization', ['x', 's'], ['y'], axis=1, epsilon=1e-3)],
       [vi('x', [3, 4, 5])], [vi('y', None)], [w('s', [4, 5])])
# caches [batch, seq, rotary_dim / 2] (no position ids), partial rotation, both layouts
save23('rotary_interleaved_partial_23', [helper.make_node(
    'RotaryEmbedding', ['x', 'c', 's'], ['y'], interleaved=1, rotary_embedding_dim=6)],
    [vi('x', [2, 3, 5, 8]), vi('c', [2, 5, 3]), vi('s', [2, 5, 3])], [vi('y', None)])
save23('rotary_3d_halves_23', [helper.make_node('RotaryEmbedding', ['x', 'c', 's'], ['y'], num_heads=2)],
       [vi('x', [1, 4, 16]), vi('c', [1, 4, 4]), vi('s', [1, 4, 4])], [vi('y', None)])
# a Loop body that declares its iteration number and condition [1] (paddle2onnx does; the
# spec says scalars; onnxruntime runs it)
_body = helper.make_graph(
    [helper.make_node('Identity', ['cond_in'], ['cond_out']),
     helper.make_node('Cast', ['i'], ['fi'], to=TensorProto.FLOAT),
     helper.make_node('Add', ['acc_in', 'fi'], ['acc_out'])], 'body',
    [vi('i', [1], TensorProto.INT64), vi('cond_in', [1], TensorProto.BOOL), vi('acc_in', [1, 4])],
    [vi('cond_out', [1], TensorProto.BOOL), vi('acc_out', [1, 4])])
save('loop_body_iter_shape1', [helper.make_node('Loop', ['n', 'cond', 'x'], ['y'], body=_body)],
     [vi('x', [1, 4])], [vi('y', None)],
     [numpy_helper.from_array(np.array(3, np.int64), 'n'), numpy_helper.from_array(np.array([True]), 'cond')],
     opset=13)
# recurrent operators: weights that differ per unit (the backend data's GRUs have equal
# weights or saturated gates), GRU in both reset orders, both directions, sequence_lens,
# initial states, LSTM peepholes (onnxruntime has no layout 1)
def _i32(name, vals):
    return numpy_helper.from_array(np.array(vals, np.int32), name)


for _lbr in (0, 1):
    save(f'gru_bidir_lbr{_lbr}', [helper.make_node('GRU', ['x', 'W', 'R', 'B', 'sl', 'h0'], ['y', 'yh'], hidden_size=6,
         direction='bidirectional', linear_before_reset=_lbr)],
         [vi('x', [5, 3, 4]), vi('h0', [2, 3, 6])], [vi('y', None), vi('yh', None)],
         [w('W', [2, 18, 4]), w('R', [2, 18, 6]), w('B', [2, 36]), _i32('sl', [5, 2, 4])], opset=14)
save('lstm_peephole_reverse', [helper.make_node('LSTM', ['x', 'W', 'R', 'B', '', 'h0', 'c0', 'P'], ['y', 'yh', 'yc'],
     hidden_size=5, direction='reverse')],
     [vi('x', [4, 2, 3]), vi('h0', [1, 2, 5]), vi('c0', [1, 2, 5])], [vi('y', None), vi('yh', None), vi('yc', None)],
     [w('W', [1, 20, 3]), w('R', [1, 20, 5]), w('B', [1, 40]), w('P', [1, 15])], opset=14)
save('rnn_bidir_seqlens', [helper.make_node('RNN', ['x', 'W', 'R', 'B', 'sl'], ['y', 'yh'], hidden_size=7,
     direction='bidirectional')], [vi('x', [6, 2, 5])], [vi('y', None), vi('yh', None)],
     [w('W', [2, 7, 5]), w('R', [2, 7, 7]), w('B', [2, 14]), _i32('sl', [6, 3])], opset=14)
# Resize antialias (opset 18): the kernel stretched by 1 / scale on shrinking axes (onnxq
# ignored the attribute before); half_pixel_symmetric's adjustment by the rounded output
# length (onnxq used the unrounded one). onnxruntime agrees with the ONNX reference on
# half_pixel here; on align_corners and pytorch_half_pixel its antialias differs from it.
for _mode, _sc, _ex in (('linear', [1, 1, 0.75, 0.4], 0), ('cubic', [1, 1, 0.5, 0.3], 1), ('cubic', [1, 1, 0.6, 1.5], 0)):
    save(f'resize_{_mode}_antialias_{"excl" if _ex else "down"}{"_up" if _sc[3] > 1 else ""}',
         [helper.make_node('Resize', ['x', '', 'scales'], ['y'], mode=_mode, antialias=1,
                           **({'exclude_outside': 1} if _ex else {}))],
         [vi('x', [1, 2, 13, 17])], [vi('y', None)],
         [numpy_helper.from_array(np.array(_sc, np.float32), 'scales')], opset=19)
save('resize_linear_half_pixel_symmetric', [helper.make_node('Resize', ['x', '', 'scales'], ['y'], mode='linear',
     coordinate_transformation_mode='half_pixel_symmetric')], [vi('x', [1, 2, 9, 7])], [vi('y', None)],
     [numpy_helper.from_array(np.array([1, 1, 0.75, 1.5], np.float32), 'scales')], opset=19)
