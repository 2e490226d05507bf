#!/usr/bin/env node
// Sanity check of the images made by models/make_text_images.py with the float
// PaddleOCR models in onnxruntime-node: are the rendering and the preprocessing
// right, i.e. do the real models do their job on this data?
//
//   node models/check_text_images.js DATA [ASSETS]
//
// DATA is a folder written by make_text_images.py (with det/, cls/, rec/);
// ASSETS holds the PaddleOCR models (default: CACHE/ocr/package/assets, where
// CACHE is $ONNXQ_CACHE or ~/.cache/onnxq, as .ci/fetch-models.sh fills it).
// onnxruntime-node is found by tests/ortlib.js ($ONNXQ_ORT_DIR, else
// CACHE/node_modules); when it is missing the script prints SKIP and exits 77.
//
// Reports
//   cls: orientation accuracy against cls/labels.txt (model output index 0 =
//        label "0", upright; index 1 = label "180"),
//   det: fraction of pixels with probability > 0.3 inside the rendered text
//        boxes (recall-like; DB marks a band shrunk towards the middle of each
//        line, so well below 100 % even when every line is found) and outside
//        them (false alarms), and the fraction of lines found (mid-line above
//        0.3 along >= 80 % of its length),
//   rec: greedy CTC decoding against the rendered text (exact lines, and
//        character accuracy 1 - edit distance / length; leading and trailing
//        spaces of the decoded text are ignored).
// Exit status 1 when a number falls below the threshold given in docs/accuracy.md.
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32 } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));

const CACHE = process.env.ONNXQ_CACHE ||
    path.join(process.env.HOME || '/root', '.cache', 'onnxq');

function readLabels(file) {
    return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length).map((l) => {
        const tab = l.indexOf('\t');
        return { image: l.slice(0, tab), label: l.slice(tab + 1) };
    });
}

function stemOf(image) { return path.basename(image, '.png'); }

async function runSet(ort, model, dir, fn) {
    const sess = await ort.InferenceSession.create(model);
    const input = sess.inputNames[0];
    const out = sess.outputNames[0];
    const labels = readLabels(path.join(dir, 'labels.txt'));
    let ms = 0;
    for (const l of labels) {
        const t = readNpyF32(path.join(dir, 'tensors', stemOf(l.image), input + '.npy'));
        const feeds = {};
        feeds[input] = new ort.Tensor('float32', t.data, t.shape);
        const t0 = process.hrtime.bigint();
        const r = await sess.run(feeds);
        ms += Number(process.hrtime.bigint() - t0) / 1e6;
        fn(l, r[out], t);
    }
    return { n: labels.length, ms: ms / Math.max(1, labels.length) };
}

// Point-in-convex-quad (either winding).
function inQuad(q, x, y) {
    let pos = 0, neg = 0;
    for (let i = 0; i < 4; i++) {
        const [x0, y0] = q[i], [x1, y1] = q[(i + 1) % 4];
        const c = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0);
        if (c > 0) pos++; else if (c < 0) neg++;
    }
    return pos === 0 || neg === 0;
}

function editDistance(a, b) {
    const d = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
        let prev = d[0];
        d[0] = i;
        for (let j = 1; j <= b.length; j++) {
            const cur = d[j];
            d[j] = Math.min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
            prev = cur;
        }
    }
    return d[b.length];
}

async function main() {
    const data = process.argv[2];
    if (!data) {
        console.error('usage: node models/check_text_images.js DATA [ASSETS]');
        process.exit(2);
    }
    const assets = process.argv[3] || path.join(CACHE, 'ocr', 'package', 'assets');
    let ok = true;

    // cls
    let right = 0, conf = [[0, 0], [0, 0]];
    const c = await runSet(ort, path.join(assets, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'),
        path.join(data, 'cls'), (l, y) => {
            const pred = y.data[1] > y.data[0] ? 1 : 0;
            const want = Number(l.label);
            conf[want][pred]++;
            if (pred === want) right++;
        });
    const clsAcc = right / c.n;
    console.log(`cls: ${c.n} crops, orientation accuracy ${(100 * clsAcc).toFixed(1)} % ` +
        `(upright as upright ${conf[0][0]}/${conf[0][0] + conf[0][1]}, ` +
        `rotated as rotated ${conf[1][1]}/${conf[1][0] + conf[1][1]}), ${c.ms.toFixed(1)} ms/crop`);
    if (clsAcc < 0.9) ok = false;

    // det
    let inOn = 0, inAll = 0, outOn = 0, outAll = 0, lines = 0, linesFound = 0;
    const d = await runSet(ort, path.join(assets, 'ch_PP-OCRv4_det_infer.onnx'),
        path.join(data, 'det'), (l, y, x) => {
            const [H, W] = [y.dims[2], y.dims[3]];
            if (H !== x.shape[2] || W !== x.shape[3]) throw new Error('det map size differs from input');
            const boxes = JSON.parse(l.label).map((b) => b.points);
            const inside = new Uint8Array(H * W);
            for (const q of boxes) {
                const xs = q.map((p) => p[0]), ys = q.map((p) => p[1]);
                let on = 0, all = 0;
                for (let py = Math.max(0, Math.floor(Math.min(...ys))); py <= Math.min(H - 1, Math.ceil(Math.max(...ys))); py++)
                    for (let px = Math.max(0, Math.floor(Math.min(...xs))); px <= Math.min(W - 1, Math.ceil(Math.max(...xs))); px++)
                        if (inQuad(q, px + 0.5, py + 0.5)) {
                            inside[py * W + px] = 1;
                            all++;
                            if (y.data[py * W + px] > 0.3) on++;
                        }
                // DB predicts a band shrunk towards the line's middle, so a line
                // counts as found when its mid-line (from 10 % to 90 % of its
                // length) is above the threshold at >= 80 % of 64 sample points.
                const m0 = [(q[0][0] + q[3][0]) / 2, (q[0][1] + q[3][1]) / 2];
                const m1 = [(q[1][0] + q[2][0]) / 2, (q[1][1] + q[2][1]) / 2];
                let hit = 0;
                for (let k = 0; k < 64; k++) {
                    const t = 0.1 + 0.8 * k / 63;
                    const px = Math.min(W - 1, Math.max(0, Math.floor(m0[0] + t * (m1[0] - m0[0]))));
                    const py = Math.min(H - 1, Math.max(0, Math.floor(m0[1] + t * (m1[1] - m0[1]))));
                    if (y.data[py * W + px] > 0.3) hit++;
                }
                lines++;
                if (hit >= 0.8 * 64) linesFound++;
            }
            for (let i = 0; i < H * W; i++) {
                const hot = y.data[i] > 0.3;
                if (inside[i]) { inAll++; if (hot) inOn++; } else { outAll++; if (hot) outOn++; }
            }
        });
    const fin = inOn / inAll, fout = outOn / outAll, lf = linesFound / lines;
    console.log(`det: ${d.n} pages, p > 0.3 on ${(100 * fin).toFixed(1)} % of text-box pixels, ` +
        `${(100 * fout).toFixed(3)} % of other pixels; ${linesFound}/${lines} lines ` +
        `(${(100 * lf).toFixed(1)} %) found along their mid-line, ${d.ms.toFixed(1)} ms/page`);
    if (fin < 0.3 || fout > 0.01 || lf < 0.9) ok = false;

    // rec
    const keys = fs.readFileSync(path.join(assets, 'ppocr_keys_v1.txt'), 'utf8')
        .split('\n').map((s) => s.replace(/\r$/, ''));
    if (keys[keys.length - 1] === '') keys.pop();
    // PaddleOCR CTCLabelDecode: index 0 is the CTC blank, then the dictionary,
    // then ' ' (use_space_char=True).
    const chars = ['<blank>'].concat(keys, [' ']);
    let exact = 0, errs = 0, len = 0;
    const bad = [];
    const r = await runSet(ort, path.join(assets, 'ch_PP-OCRv4_rec_infer.onnx'),
        path.join(data, 'rec'), (l, y) => {
            const [T, C] = [y.dims[1], y.dims[2]];
            if (C !== chars.length) throw new Error(`rec: ${C} classes, dictionary has ${chars.length}`);
            let s = '', last = -1;
            for (let t = 0; t < T; t++) {
                let best = 0;
                for (let k = 1; k < C; k++) if (y.data[t * C + k] > y.data[t * C + best]) best = k;
                if (best !== 0 && best !== last) s += chars[best];
                last = best;
            }
            s = s.trim(); // the model often adds a space at either end
            if (s === l.label) exact++; else if (bad.length < 5) bad.push(`"${l.label}" -> "${s}"`);
            errs += editDistance(s, l.label);
            len += l.label.length;
        });
    const charAcc = 1 - errs / len;
    console.log(`rec: ${r.n} lines, ${exact} (${(100 * exact / r.n).toFixed(1)} %) read exactly, ` +
        `character accuracy ${(100 * charAcc).toFixed(1)} %, ${r.ms.toFixed(1)} ms/line`);
    if (bad.length) console.log('rec: e.g. ' + bad.join(', '));
    if (charAcc < 0.8) ok = false;

    console.log(ok ? 'check: data OK' : 'check: FAILED (see thresholds in docs/accuracy.md)');
    process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.error('check_text_images.js: ' + (e.stack || e)); process.exit(1); });
