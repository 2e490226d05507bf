// Latency of model variants in onnxruntime-node, each as a ratio to the first (the float
// model) measured in the same round: how much a quantization recipe speeds up (or slows
// down) the runtime users deploy with. Used for the det recipes in docs/accuracy.md.
// usage: node bench/ort_variants.js INPUT_NAME=INPUT.npy BASE.onnx VARIANT.onnx...
//        [--runs N (31)] [--rounds R (2)] [--threads T (1)] [--pairs]
// --pairs: interleave the models run by run (base, variant 1, ..., base, ...) and print
// for each variant the median over runs of (variant time / base time of the same run),
// which cancels most of the drift of a shared machine.
'use strict';
const path = require('path');
const { ort, readNpyF32 } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));

function arg(name, dflt) {
    const i = process.argv.indexOf(name);
    if (i < 0)
        return dflt;
    const v = Number(process.argv[i + 1]);
    process.argv.splice(i, 2);
    if (!Number.isInteger(v) || v < 1) {
        console.error(`${name} needs a positive integer`);
        process.exit(2);
    }
    return v;
}

async function main() {
    const runs = arg('--runs', 31), rounds = arg('--rounds', 2), threads = arg('--threads', 1);
    const pi = process.argv.indexOf('--pairs'), pairs = pi >= 0;
    if (pairs)
        process.argv.splice(pi, 1);
    const [feed, ...models] = process.argv.slice(2);
    if (!feed || !feed.includes('=') || models.length < 2) {
        console.error('usage: node bench/ort_variants.js NAME=INPUT.npy BASE.onnx VARIANT.onnx... [--runs N] [--rounds R] [--threads T]');
        process.exit(2);
    }
    const [name, file] = [feed.slice(0, feed.indexOf('=')), feed.slice(feed.indexOf('=') + 1)];
    const x = readNpyF32(file);
    const feeds = { [name]: new ort.Tensor('float32', x.data, x.shape) };
    const sessions = [];
    for (const m of models)
        sessions.push(await ort.InferenceSession.create(m, { intraOpNumThreads: threads, interOpNumThreads: 1 }));
    if (pairs) {
        for (const s of sessions)
            for (let i = 0; i < 3; i++)
                await s.run(feeds);
        const t = sessions.map(() => []);
        for (let i = 0; i < runs * rounds; i++)
            for (let k = 0; k < sessions.length; k++) {
                const t0 = process.hrtime.bigint();
                await sessions[k].run(feeds);
                t[k].push(Number(process.hrtime.bigint() - t0) / 1e6);
            }
        const med = a => { const b = [...a].sort((x, y) => x - y); return b[Math.floor(b.length / 2)]; };
        console.log(`onnxruntime-node, ${threads} thread(s), ${runs * rounds} interleaved runs after 3 warm-up runs: median time, median of per-run ratios to the first model`);
        for (let k = 0; k < sessions.length; k++) {
            const ratio = med(t[k].map((v, i) => v / t[0][i]));
            console.log(`${med(t[k]).toFixed(1).padStart(7)} ms  ${ratio.toFixed(3)}x  ${models[k]}`);
        }
        return;
    }
    console.log(`onnxruntime-node, ${threads} thread(s), median of ${runs} runs after 3 warm-up runs, ${rounds} round(s)`);
    for (let r = 0; r < rounds; r++) {
        let base = 0;
        for (let k = 0; k < sessions.length; k++) {
            for (let i = 0; i < 3; i++)
                await sessions[k].run(feeds);
            const t = [];
            for (let i = 0; i < runs; i++) {
                const t0 = process.hrtime.bigint();
                await sessions[k].run(feeds);
                t.push(Number(process.hrtime.bigint() - t0) / 1e6);
            }
            t.sort((a, b) => a - b);
            const med = t[Math.floor(runs / 2)];
            if (k === 0)
                base = med;
            console.log(`round ${r + 1}  ${med.toFixed(1).padStart(7)} ms  ${(med / base).toFixed(2)}x  ${models[k]}`);
        }
    }
}
main().catch(e => { console.error(e.message || e); process.exit(1); });
