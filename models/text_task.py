#!/usr/bin/python3
"""The text task of models/text_transformer.onnx: templated restaurant reviews, 6 classes.

Needs only numpy (Debian python3-numpy), so that tests can generate an evaluation set
without PyTorch; models/make_transformer.py imports it to train the model.

A review is 1 to 3 clauses "DET NOUN VERB [not|never] [INTENSIFIER] ADJ", joined by
"and" or "but", optionally with a filler word in front ("honestly", "overall", ...).
Each noun has a topic (food, service, place) and each adjective a polarity; "not" and
"never" flip it. The label names the *main* clause: the last clause that follows "but",
or the first clause when there is no "but". label = 2 * topic + (1 if positive else 0):

    0 food negative   1 food positive   2 service negative
    3 service positive   4 place negative   5 place positive

so the model must find the right clause (position, the word "but") and combine the
negation with the adjective: chance is 1/6. Token ids: 0 = padding, 1 = [CLS] (always
position 0), then the words of VOCAB; every sequence is SEQ_LEN long, padded at the end.

    python3 models/text_task.py DIR --set calib|eval [--count N] [--seed N]

writes DIR/NNN/tokens.npy (int64 [1, SEQ_LEN], the --calib/--data layout of docs/data.md)
and DIR/labels.txt (one "NNN<TAB>label<TAB>sentence" line per sample; not a tensor file,
so onnxq's readers ignore it).
"""
import argparse
import os
import sys

import numpy as np

SEQ_LEN = 24
TOPICS = ("food", "service", "place")
NOUNS = (
    ("soup", "pizza", "pasta", "salad", "bread", "coffee", "cake", "steak", "fish", "wine"),
    ("waiter", "staff", "service", "host", "manager", "cashier", "chef", "waitress"),
    ("room", "table", "music", "view", "place", "decor", "terrace", "bathroom"),
)
POSITIVE = ("good", "great", "tasty", "friendly", "lovely", "excellent", "nice", "fresh",
            "clean", "pleasant", "perfect", "warm")
NEGATIVE = ("bad", "awful", "cold", "rude", "slow", "dirty", "bland", "terrible", "noisy",
            "stale", "boring", "greasy")
NEGATIONS = ("not", "never")
INTENSIFIERS = ("very", "really", "quite", "so", "extremely", "rather")
DETS = ("the", "our", "my", "this", "their")
VERBS = ("was", "is", "seemed", "looked", "felt", "tasted")
FILLERS = ("honestly", "overall", "frankly", "today", "sadly", "luckily", "again")
CONJ = ("and", "but")

VOCAB = sorted(set(w for ns in NOUNS for w in ns) | set(POSITIVE) | set(NEGATIVE)
               | set(NEGATIONS) | set(INTENSIFIERS) | set(DETS) | set(VERBS) | set(FILLERS)
               | set(CONJ))
WORD_ID = {w: i + 2 for i, w in enumerate(VOCAB)}
VOCAB_SIZE = len(VOCAB) + 2
NUM_CLASSES = 2 * len(TOPICS)
SEEDS = {"train": 7, "calib": 1001, "eval": 2002}
COUNTS = {"calib": 32, "eval": 256}


def _clause(rng):
    """One clause: (words, topic, positive)."""
    topic = int(rng.integers(len(TOPICS)))
    pos = bool(rng.integers(2))
    neg = rng.random() < 0.3
    words = [DETS[rng.integers(len(DETS))], NOUNS[topic][rng.integers(len(NOUNS[topic]))],
             VERBS[rng.integers(len(VERBS))]]
    if neg:
        words.append(NEGATIONS[rng.integers(len(NEGATIONS))])
    if rng.random() < 0.4:
        words.append(INTENSIFIERS[rng.integers(len(INTENSIFIERS))])
    adj = POSITIVE if pos else NEGATIVE
    words.append(adj[rng.integers(len(adj))])
    return words, topic, pos != neg


def sentence(rng):
    """One review: (words, label)."""
    words = [FILLERS[rng.integers(len(FILLERS))]] if rng.random() < 0.3 else []
    n = int(rng.choice([1, 2, 3], p=[0.25, 0.45, 0.30]))
    main = None
    for i in range(n):
        cw, topic, positive = _clause(rng)
        if i > 0:
            conj = CONJ[rng.integers(2)]
            words.append(conj)
            if conj == "but":
                main = (topic, positive)
        elif main is None:
            first = (topic, positive)
        words += cw
    topic, positive = main if main is not None else first
    return words, 2 * topic + int(positive)


def encode(words):
    ids = [1] + [WORD_ID[w] for w in words]
    if len(ids) > SEQ_LEN:
        raise ValueError(f"sentence of {len(ids)} tokens > {SEQ_LEN}")
    return ids + [0] * (SEQ_LEN - len(ids))


def make(seed, count):
    """count samples from seed: (ids int64 [count, SEQ_LEN], labels int64 [count], sentences)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((count, SEQ_LEN), dtype=np.int64)
    labels = np.zeros(count, dtype=np.int64)
    sentences = []
    for i in range(count):
        words, label = sentence(rng)
        ids[i] = encode(words)
        labels[i] = label
        sentences.append(" ".join(words))
    return ids, labels, sentences


def write_folder(out, ids, labels, sentences):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "labels.txt"), "w") as f:
        for i in range(len(ids)):
            d = os.path.join(out, f"{i:03d}")
            os.makedirs(d, exist_ok=True)
            np.save(os.path.join(d, "tokens.npy"), ids[i:i + 1])
            f.write(f"{i:03d}\t{labels[i]}\t{sentences[i]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--set", choices=("calib", "eval"), default="eval")
    ap.add_argument("--count", type=int)
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else SEEDS[a.set]
    count = a.count if a.count is not None else COUNTS[a.set]
    ids, labels, sentences = make(seed, count)
    write_folder(a.out, ids, labels, sentences)
    hist = np.bincount(labels, minlength=NUM_CLASSES)
    print(f"{a.out}: seed {seed}: {count} samples, classes {' '.join(map(str, hist))}")


if __name__ == "__main__":
    sys.exit(main())
