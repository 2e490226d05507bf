// Measures quantization variants of models/text_transformer.onnx in onnxruntime-node:
// for each variant (models/transformer_variants.txt: a name and the `onnxq quantize`
// arguments), quantizes the float model, runs float and quantized model on every sample
// of an eval folder (batch 1, graph optimizations on, 1 thread) and reports, against the
// float model: per output the cosine similarity of each sample (mean and min) and the
// SQNR over all samples together (10 log10(sum f^2 / sum (f - q)^2)); the task accuracy
// against the labels (argmax of `logits`) and the agreement with the float model's
// argmax; the file size; the latency and the process CPU time per run (batch 1, 1 thread,
// the models interleaved round by round, median time per run and median of the per-round
// ratios to float). On a loaded machine the CPU time is the steadier of the two: time the
// process waits for a core does not count in it.
//
// usage: node models/eval_transformer.js --onnxq EXE --model FLOAT.onnx --calib DIR --eval DIR
//          [--variants FILE] [--only NAME,...] [--work DIR] [--rounds N (21)] [--latency-samples K (8)]
//          [--latency-batch B (1)] [--no-latency] [--opt all|disabled] [--json FILE]
// --latency-batch B: each timed run is one batch of B samples (the first B of the eval
// set) instead of K runs of batch 1; the time reported is per batch.
// The eval folder is what models/text_task.py writes: NNN/tokens.npy (int64 [1, 24]) and
// labels.txt ("NNN<TAB>label<TAB>sentence"). A variant whose arguments are "@FILE.onnx"
// is that model, measured as it is (e.g. one made by another tool). The --json file holds every number printed
// (an SQNR without error, the float model's own, is null there).
// Exit status: 0, 1 when a variant could not be quantized or run, 2 for bad usage.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { ort, readNpy } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));

function usage(msg) {
    console.error(`eval_transformer: ${msg}\nusage: node models/eval_transformer.js --onnxq EXE --model FLOAT.onnx ` +
                  '--calib DIR --eval DIR [--variants FILE] [--only NAME,...] [--work DIR] [--rounds N] ' +
                  '[--latency-samples K] [--latency-batch B] [--no-latency] [--opt all|disabled] [--json FILE]');
    process.exit(2);
}

function parseArgs(argv) {
    const a = { variants: path.join(__dirname, 'transformer_variants.txt'), rounds: 21,
                latencySamples: 8, latencyBatch: 1, latency: true, opt: 'all', only: null, work: null, json: null };
    const keys = { '--onnxq': 'onnxq', '--model': 'model', '--calib': 'calib', '--eval': 'eval',
                   '--variants': 'variants', '--only': 'only', '--work': 'work', '--rounds': 'rounds',
                   '--latency-samples': 'latencySamples', '--latency-batch': 'latencyBatch', '--opt': 'opt',
                   '--json': 'json' };
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--no-latency') { a.latency = false; continue; }
        const k = keys[argv[i]];
        if (!k) usage(`unknown argument ${argv[i]}`);
        if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
        a[k] = argv[++i];
    }
    for (const k of ['onnxq', 'model', 'calib', 'eval'])
        if (!a[k]) usage(`--${k} is required`);
    for (const k of ['rounds', 'latencySamples', 'latencyBatch']) {
        a[k] = Number(a[k]);
        if (!Number.isInteger(a[k]) || a[k] < 1) usage(`${k} needs a positive integer`);
    }
    if (a.opt !== 'all' && a.opt !== 'disabled') usage('--opt is all or disabled');
    a.work = a.work || fs.mkdtempSync('/tmp/eval_transformer.');
    fs.mkdirSync(a.work, { recursive: true });
    return a;
}

// [{name, args}] from the variants file ($CALIB replaced), filtered by --only.
function readVariants(file, calib, only) {
    const out = [];
    fs.readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
        const t = line.trim();
        if (!t || t.startsWith('#')) return;
        const [name, ...args] = t.split(/\s+/);
        if (!/^[A-Za-z0-9_.-]+$/.test(name) || name === 'float')
            usage(`${file}:${i + 1}: bad variant name "${name}"`);
        out.push({ name, args: args.map(s => s.replace(/\$CALIB/g, calib)) });
    });
    if (!only) return out;
    const want = only.split(',');
    for (const w of want)
        if (!out.some(v => v.name === w)) usage(`--only: no variant "${w}" in ${file}`);
    return out.filter(v => want.includes(v.name));
}

// The eval samples: [{id, tokens: ort.Tensor, label}] sorted by id.
function readEval(dir) {
    const labels = new Map();
    for (const line of fs.readFileSync(path.join(dir, 'labels.txt'), 'utf8').split('\n')) {
        const f = line.split('\t');
        if (f.length >= 2) labels.set(f[0], Number(f[1]));
    }
    const ids = fs.readdirSync(dir).filter(d => fs.existsSync(path.join(dir, d, 'tokens.npy'))).sort();
    if (!ids.length) usage(`${dir}: no NNN/tokens.npy samples`);
    return ids.map(id => {
        const t = readNpy(path.join(dir, id, 'tokens.npy'));
        if (t.descr !== '<i8') throw new Error(`${dir}/${id}/tokens.npy: need int64, have ${t.descr}`);
        if (!labels.has(id)) throw new Error(`${dir}/labels.txt: no label for ${id}`);
        return { id, tokens: new ort.Tensor('int64', t.data, t.shape), label: labels.get(id) };
    });
}

const argmax = a => a.reduce((best, v, i) => (v > a[best] ? i : best), 0);

function compare(f, q) { // per-sample arrays of Float32Array: cosine mean/min, SQNR
    let sf = 0, se = 0, csum = 0, cmin = Infinity;
    for (let s = 0; s < f.length; s++) {
        let dot = 0, nf = 0, nq = 0;
        for (let i = 0; i < f[s].length; i++) {
            const a = f[s][i], b = q[s][i];
            dot += a * b; nf += a * a; nq += b * b; se += (a - b) * (a - b);
        }
        sf += nf;
        const c = nf === 0 && nq === 0 ? 1 : dot / Math.sqrt(nf * nq);
        csum += c;
        cmin = Math.min(cmin, c);
    }
    const sqnr = se === 0 ? Infinity : 10 * Math.log10(sf / se);
    return { cosine_mean: csum / f.length, cosine_min: cmin, sqnr_db: sqnr };
}

async function main() {
    const a = parseArgs(process.argv.slice(2));
    const variants = readVariants(a.variants, a.calib, a.only);
    const samples = readEval(a.eval);
    const models = [{ name: 'float', file: a.model }];
    let failed = 0;
    for (const v of variants) {
        if (v.args.length === 1 && v.args[0].startsWith('@')) { // a model made elsewhere
            models.push({ name: v.name, file: v.args[0].slice(1), args: v.args[0] });
            continue;
        }
        const file = path.join(a.work, `${v.name}.onnx`);
        const cmd = [a.model, '-o', file, ...v.args, '--quiet'];
        const t0 = Date.now();
        try {
            execFileSync(a.onnxq, ['quantize', ...cmd], { stdio: ['ignore', 'ignore', 'pipe'] });
        } catch (e) {
            console.error(`${v.name}: onnxq quantize ${cmd.join(' ')} failed: ${String(e.stderr || e.message).trim()}`);
            failed++;
            continue;
        }
        models.push({ name: v.name, file, args: v.args.join(' '), quantize_s: (Date.now() - t0) / 1000 });
    }
    const so = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: a.opt, logSeverityLevel: 3 };
    for (const m of models) {
        try {
            m.session = await ort.InferenceSession.create(m.file, so);
            m.out = { logits: [], embedding: [] };
            for (const s of samples) {
                const r = await m.session.run({ tokens: s.tokens });
                m.out.logits.push(Float32Array.from(r.logits.data));
                m.out.embedding.push(Float32Array.from(r.embedding.data));
            }
        } catch (e) {
            console.error(`${m.name}: onnxruntime: ${e.message.split('\n')[0]}`);
            if (m.name === 'float') process.exit(1);
            m.broken = true;
            failed++;
        }
    }
    const ok = models.filter(m => !m.broken);
    const fl = models[0];
    for (const m of ok) {
        m.size_bytes = fs.statSync(m.file).size;
        const pred = m.out.logits.map(argmax);
        m.accuracy = pred.filter((p, i) => p === samples[i].label).length / samples.length;
        m.agreement = pred.filter((p, i) => p === argmax(fl.out.logits[i])).length / samples.length;
        m.logits = compare(fl.out.logits, m.out.logits);
        m.embedding = compare(fl.out.embedding, m.out.embedding);
    }
    const seq = samples[0].tokens.dims[1];
    const lb = Math.min(a.latencyBatch, samples.length);
    let feeds; // the runs of one timed round: K of batch 1, or one of batch B
    if (lb > 1) {
        const data = new BigInt64Array(lb * seq);
        samples.slice(0, lb).forEach((s, i) => data.set(s.tokens.data, i * seq));
        feeds = [{ tokens: new ort.Tensor('int64', data, [lb, seq]) }];
    } else {
        feeds = samples.slice(0, Math.min(a.latencySamples, samples.length)).map(s => ({ tokens: s.tokens }));
    }
    if (a.latency) { // interleaved: every round runs every model on the same feeds
        const t = ok.map(() => []), cpu = ok.map(() => []);
        for (const m of ok) // warm-up
            for (const f of feeds) await m.session.run(f);
        for (let r = 0; r < a.rounds; r++)
            for (let j = 0; j < ok.length; j++) {
                const mi = (j + r) % ok.length; // rotate the order from round to round
                const c0 = process.cpuUsage(), t0 = process.hrtime.bigint();
                for (const f of feeds) await ok[mi].session.run(f);
                t[mi].push(Number(process.hrtime.bigint() - t0) / 1e6 / feeds.length);
                const c = process.cpuUsage(c0);
                cpu[mi].push((c.user + c.system) / 1e3 / feeds.length);
            }
        const med = x => { const b = [...x].sort((p, q) => p - q); return b[Math.floor(b.length / 2)]; };
        ok.forEach((m, j) => {
            m.latency_ms = med(t[j]);
            m.latency_ratio = med(t[j].map((v, r) => v / t[0][r]));
            m.cpu_ms = med(cpu[j]);
            m.cpu_ratio = med(cpu[j].map((v, r) => v / cpu[0][r]));
        });
    }
    const n = samples.length;
    console.log(`eval_transformer: ${n} samples (${a.eval}), onnxruntime-node, optimizations ${a.opt}, 1 thread` +
                (a.latency ? `; latency: batch ${lb}, median over ${a.rounds} interleaved rounds of ${feeds.length} run(s)` : ''));
    const pct = x => `${(100 * x).toFixed(1)} %`;
    const db = x => (Number.isFinite(x) ? `${x.toFixed(1)} dB` : '-'); // the float model: no error
    const cols = ['variant', 'logits cos mean/min', 'logits SQNR', 'emb cos mean/min', 'emb SQNR',
                  'accuracy', 'agree', 'size', 'latency', 'CPU time'];
    const rows = ok.map(m => [
        m.name,
        `${m.logits.cosine_mean.toFixed(5)} / ${m.logits.cosine_min.toFixed(4)}`, db(m.logits.sqnr_db),
        `${m.embedding.cosine_mean.toFixed(5)} / ${m.embedding.cosine_min.toFixed(4)}`, db(m.embedding.sqnr_db),
        pct(m.accuracy), pct(m.agreement), `${(m.size_bytes / 1024).toFixed(0)} KiB`,
        a.latency ? `${m.latency_ms.toFixed(3)} ms ${m.latency_ratio.toFixed(2)}x` : '-',
        a.latency ? `${m.cpu_ms.toFixed(3)} ms ${m.cpu_ratio.toFixed(2)}x` : '-']);
    const w = cols.map((c, i) => Math.max(c.length, ...rows.map(r => r[i].length)));
    console.log(cols.map((c, i) => c.padEnd(w[i])).join('  '));
    for (const r of rows) console.log(r.map((c, i) => c.padEnd(w[i])).join('  '));
    const summary = {
        samples: n, eval: a.eval, model: a.model, optimizations: a.opt,
        latency: a.latency ? { batch: lb, runs_per_round: feeds.length, rounds: a.rounds } : null,
        variants: ok.map(m => {
            const { session, out, broken, ...rest } = m; // eslint-disable-line no-unused-vars
            return rest;
        }),
    };
    for (const v of summary.variants) console.log(JSON.stringify(v));
    if (a.json) {
        const tmp = `${a.json}.tmp`;
        fs.writeFileSync(tmp, JSON.stringify(summary, null, 1) + '\n');
        fs.renameSync(tmp, a.json);
    }
    process.exit(failed ? 1 : 0);
}
main().catch(e => { console.error(`eval_transformer: ${e.message || e}`); process.exit(1); });
