#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The malformed-input corpus (docs/testing.md): generates, at test time, small valid datasets in
# every format anvil reads (MNIST-format IDX raw and gzip, CIFAR-10, IMDB, PTB, a safetensors
# checkpoint) and ~85 cases, each a copy of one of them with ONE file malformed (truncated, wrong
# magic, lying sizes, overlapping offsets, bad UTF-8/JSON, gzip bombs, empty, a directory, a FIFO,
# /dev/zero). Then every case must be refused with one clear error that names the file and the
# problem, with bounded memory and nothing overwritten:
#   malformed_corpus.py readers CHECKER  -- in process, by tests/corpus/check_malformed_readers
#   malformed_corpus.py cli ANVIL        -- end to end, by `anvil train` (one stderr line, exit != 0)
# Both need ANVIL (the CLI writes the corpus's one valid checkpoint); `readers` takes it as
# --anvil. Nothing is committed but this script: bombs are compressed here, in 1 MiB pieces.
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import zlib

# The peak RSS of an `anvil train` run on a malformed case may exceed that of the real epoch that
# wrote the base checkpoint (data, model, optimizer, one epoch) by at most this much. Relative,
# so that it holds in the sanitizer build too (ASan's shadow memory).
CLI_RSS_SLACK_MB = 64
MNIST_ARGS = ["--model", "mlp_mnist", "--optimizer", "adam", "--lr", "1e-3", "--batch", "20",
              "--seed", "1", "--threads", "1", "--no-loader-thread"]


# ---- valid files --------------------------------------------------------------------------------

def idx(dims, payload, type_code=0x08):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, mtime=0)


def gzip_bomb(head, zeros):
    """A gzip stream of `head` then `zeros` zero bytes, never held uncompressed."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [c.compress(head)]
    mib = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(c.compress(mib))
    out.append(c.flush())
    return b"".join(out)


def safetensors(header, data, raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def split_safetensors(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def base_paths(root):
    return {"mnist": f"{root}/base/mnist", "cifar": f"{root}/base/cifar", "imdb": f"{root}/base/imdb",
            "ptb": f"{root}/base/ptb", "checkpoint": f"{root}/base/ckpt/good.safetensors"}


def make_bases(root):
    """The valid datasets (the checkpoint is written by the driver: run_base_checkpoint)."""
    rng = random.Random(23)
    pixels = lambda n: bytes(rng.randrange(256) for _ in range(n))
    labels = lambda n: bytes(i % 10 for i in range(n))
    b = {}
    # MNIST: the train split gzipped, the test split raw (both code paths).
    m = b["mnist"] = f"{root}/base/mnist"
    write(f"{m}/train-images-idx3-ubyte.gz", gz(idx([40, 28, 28], pixels(40 * 784))))
    write(f"{m}/train-labels-idx1-ubyte.gz", gz(idx([40], labels(40))))
    write(f"{m}/t10k-images-idx3-ubyte", idx([20, 28, 28], pixels(20 * 784)))
    write(f"{m}/t10k-labels-idx1-ubyte", idx([20], labels(20)))
    c = b["cifar"] = f"{root}/base/cifar"
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        write(f"{c}/{name}", b"".join(bytes([i % 10]) + pixels(3072) for i in range(2)))
    i = b["imdb"] = f"{root}/base/imdb"
    words = ["good", "bad", "film", "plot", "actor", "great", "awful", "boring", "fun", "story"]
    write(f"{i}/imdb_word_index.json", json.dumps({w: k + 1 for k, w in enumerate(words)}).encode())
    for name in ["train.tsv", "test.tsv"]:
        write(f"{i}/{name}", "".join(f"{k % 2}\t{' '.join(rng.choice(words) for _ in range(8))}\n"
                                     for k in range(20)).encode())
    p = b["ptb"] = f"{root}/base/ptb"
    text = "".join(" ".join(rng.choice(words) for _ in range(12)) + "\n" for _ in range(60))
    write(f"{p}/ptb.valid.txt", text.encode())
    write(f"{p}/ptb.test.txt", text[: len(text) // 2].encode())
    assert b == {k: v for k, v in base_paths(root).items() if k != "checkpoint"}


def run_base_checkpoint(root, anvil):
    """One real epoch of `anvil train` on the MNIST base writes the corpus's valid checkpoint;
    returns the run's peak RSS in MB."""
    ck = base_paths(root)["checkpoint"]
    os.makedirs(os.path.dirname(ck))
    code, err, rss_mb, _ = run_measured([anvil, "train", "--dataset", base_paths(root)["mnist"],
                                         "--epochs", "1", "--checkpoint", ck] + MNIST_ARGS,
                                        f"{root}/base_run")
    if code != 0 or not os.path.isfile(ck):
        sys.exit(f"malformed_corpus: could not write the base checkpoint:\n{err}")
    return rss_mb


# ---- the cases -----------------------------------------------------------------------------------

DIRECTORY, FIFO, DEV_ZERO = object(), object(), object()


def cases(bases):
    """(id, kind, file to replace relative to the base, content or DIRECTORY/FIFO/DEV_ZERO,
    regex the error must match)."""
    out = []
    add = lambda *c: out.append(c)
    img = lambda n, extra=b"": idx([n, 28, 28], bytes(n * 784)) + extra
    raw, gzn = "t10k-images-idx3-ubyte", "train-images-idx3-ubyte.gz"
    # IDX, raw
    add("idx_empty", "mnist", raw, b"", r"is empty \(0 bytes\)")
    add("idx_shorter_than_magic", "mnist", raw, b"\0\0\x08", r"too short for an IDX header")
    add("idx_wrong_magic", "mnist", raw, b"\x01\x02\x08\x03" + bytes(40), r"bad magic number 01 02 08 03")
    add("idx_float_type", "mnist", raw, idx([2], bytes(8), 0x0D), r"element type 0x0d \(float32\) is not supported")
    add("idx_unknown_type", "mnist", raw, idx([2], bytes(2), 0x07), r"unknown element type 0x07")
    add("idx_zero_dims", "mnist", raw, b"\0\0\x08\0", r"declares 0 dimensions")
    add("idx_header_cut", "mnist", raw, b"\0\0\x08\x03" + bytes(6), r"truncated in its header")
    add("idx_truncated_payload", "mnist", raw, idx([20, 28, 28], bytes(1000)), r"bytes of data, file has 1000 \(truncated\)")
    add("idx_lying_size_extra", "mnist", raw, img(20, bytes(5)), r"5 bytes after the data")
    add("idx_size_overflow", "mnist", raw, idx([0xFFFFFFFF] * 3, b""), r"overflows 64 bits")
    add("idx_size_over_limit", "mnist", raw, idx([1 << 20, 1 << 20, 2], b""), r"more than the limit of 1073741824 bytes")
    add("idx_gzip_under_raw_name", "mnist", raw, gz(img(20)), r"is gzip-compressed .*must end in \.gz")
    add("idx_labels_as_images", "mnist", raw, idx([20], labels20()), r"images must be 3-D")
    add("idx_count_mismatch", "mnist", "t10k-labels-idx1-ubyte", idx([19], bytes(19)), r"holds 20 images but .* holds 19 labels")
    add("idx_label_out_of_range", "mnist", "t10k-labels-idx1-ubyte", idx([20], bytes(19) + b"\x0a"), r"label 10 at index 19")
    add("idx_no_images", "mnist", raw, idx([0, 28, 28], b""), r"holds no images")
    add("idx_directory", "mnist", raw, DIRECTORY, r"is a directory")
    add("idx_dev_zero", "mnist", raw, DEV_ZERO, r"not a regular file \(a character device\)")
    add("idx_fifo", "mnist", raw, FIFO, r"not a regular file \(a FIFO\)")
    # IDX, gzip
    add("gz_not_gzip", "mnist", gzn, img(40), r"is not gzip-compressed")
    whole = gz(idx([40, 28, 28], bytes(40 * 784)))
    add("gz_truncated_stream", "mnist", gzn, whole[: len(whole) // 2], r"truncated gzip data")
    bad_crc = bytearray(whole)
    bad_crc[-8] ^= 0xFF
    add("gz_bad_crc", "mnist", gzn, bytes(bad_crc), r"corrupt gzip data \(incorrect data check")
    add("gz_garbage_after_member", "mnist", gzn, whole + bytes(12), r"corrupt gzip data")
    add("gz_bomb_declares_too_much", "mnist", gzn, gzip_bomb(idx([1, 32768, 32769], b""), 64 << 20),
        r"more than the limit of 1073741824 bytes")
    add("gz_bomb_lying_size", "mnist", gzn, gzip_bomb(idx([40, 28, 28], b""), 64 << 20),
        r"the gzip stream holds more")
    add("gz_empty_stream", "mnist", gzn, gz(b""), r"is empty \(0 bytes\)")
    add("gz_empty_file", "mnist", gzn, b"", r"is empty \(0 bytes\)")
    add("gz_header_only", "mnist", gzn, gz(idx([40, 28, 28], b"")), r"gunzipped data has 0 \(truncated\)")
    add("gz_wrong_magic_inside", "mnist", gzn, gz(b"\x01\x02\x08\x03" + bytes(40)), r"bad magic number")
    add("gz_random_bytes", "mnist", gzn, b"\x1f\x8b" + bytes(random.Random(5).randrange(256) for _ in range(200)),
        r"corrupt gzip data|truncated gzip data")
    # CIFAR-10
    rec = lambda label: bytes([label]) + bytes(3072)
    b3 = "data_batch_3.bin"
    add("cifar_empty", "cifar", b3, b"", r"is empty \(0 bytes")
    add("cifar_truncated", "cifar", b3, (rec(1) * 2)[:-10], r"not a multiple of the 3073-byte .* \(truncated\?\)")
    add("cifar_cifar100_record", "cifar", b3, bytes(3074 * 2), r"a CIFAR-100 file\?")
    add("cifar_label_10", "cifar", b3, rec(1) + rec(10), r"record 1 .* has label 10")
    add("cifar_label_255", "cifar", "test_batch.bin", rec(255), r"record 0 .* has label 255")
    add("cifar_gzip", "cifar", b3, b"\x1f\x8b" + bytes(3071), r"is gzip-compressed")
    add("cifar_directory", "cifar", b3, DIRECTORY, r"is a directory")
    add("cifar_dev_zero", "cifar", b3, DEV_ZERO, r"is not a regular file")
    add("cifar_fifo", "cifar", b3, FIFO, r"is not a regular file")
    # IMDB
    tsv, ix = "train.tsv", "imdb_word_index.json"
    add("imdb_empty_reviews", "imdb", tsv, b"", r"is empty \(0 bytes\)")
    add("imdb_nul_byte", "imdb", tsv, b"1\tgood\0film\n", r"not a text file \(NUL byte at byte offset 6")
    add("imdb_overlong_utf8", "imdb", tsv, b"1\tgood \xc0\xaf film\n", r"not a text file \(invalid UTF-8 at byte offset 7")
    add("imdb_blank_line", "imdb", tsv, b"1\tgood\n\n0\tbad\n", r"line 2: blank line")
    add("imdb_no_tab", "imdb", tsv, b"1 good film\n", r"line 1: no tab")
    add("imdb_label_2", "imdb", "test.tsv", b"0\tbad\n2\tgood\n", r"line 2: label '2' is not 0 or 1")
    add("imdb_index_truncated_json", "imdb", ix, b'{"good": 1, "bad"', r"malformed JSON")
    add("imdb_index_array", "imdb", ix, b"[1, 2]", r"must be a JSON object .* found an array")
    add("imdb_index_float_rank", "imdb", ix, b'{"good": 1.5}', r"rank of 'good' is 1.5 .* not an integer")
    add("imdb_index_rank_0", "imdb", ix, b'{"good": 0}', r"ranks go from 1")
    add("imdb_index_word_twice", "imdb", ix, b'{"good": 1, "good": 2}', r"duplicate key 'good' in the top level")
    add("imdb_index_same_rank", "imdb", ix, b'{"good": 1, "bad": 1}', r"have the same rank 1")
    add("imdb_index_bad_utf8", "imdb", ix, b'{"g\xff": 1}', r"invalid UTF-8")
    add("imdb_index_empty_object", "imdb", ix, b"{}", r"has no words")
    add("imdb_index_deep_nesting", "imdb", ix, b"[" * 100000, r"JSON nested deeper than 64 levels")
    add("imdb_reviews_directory", "imdb", tsv, DIRECTORY, r"is a directory")
    # PTB
    t = "ptb.test.txt"
    add("ptb_empty", "ptb", t, b"", r"is empty \(0 bytes\)")
    add("ptb_whitespace_only", "ptb", t, b" \n\t\n", r"is empty \(no words, only whitespace\)")
    add("ptb_nul_byte", "ptb", t, b"good film\0\n", r"not a text file \(NUL byte")
    add("ptb_surrogate_utf8", "ptb", t, b"good \xed\xa0\x80 film\n", r"invalid UTF-8 at byte offset 5")
    add("ptb_truncated_utf8", "ptb", "ptb.valid.txt", b"good film \xe2\x82", r"invalid UTF-8 at byte offset 10")
    add("ptb_binary_file", "ptb", t, idx([3, 2, 2], bytes(range(12))), r"not a text file")
    add("ptb_directory", "ptb", t, DIRECTORY, r"is a directory")
    add("ptb_dev_zero", "ptb", t, DEV_ZERO, r"a character device")
    # safetensors checkpoints
    good = open(bases["checkpoint"], "rb").read()
    header, data = split_safetensors(good)
    meta = header["__metadata__"]
    first = next(k for k in header if k != "__metadata__")
    f32 = lambda shape, a, b: {"dtype": "F32", "shape": shape, "data_offsets": [a, b]}

    def edited(fn):
        h = json.loads(json.dumps(header))
        d = fn(h)
        return safetensors(h, data if d is None else d)

    def set_meta(key, value):
        return lambda h: h["__metadata__"].__setitem__(key, value)

    ck = "good.safetensors"
    add("ck_empty", "checkpoint", ck, b"", r"file is 0 bytes, shorter than the 8-byte header length")
    add("ck_five_bytes", "checkpoint", ck, b"\x01\x02\x03\x04\x05", r"file is 5 bytes")
    add("ck_header_length_past_end", "checkpoint", ck, struct.pack("<Q", 1 << 40) + b"{}",
        r"header length 1099511627776 is larger than the rest of the file")
    add("ck_truncated", "checkpoint", ck, good[: len(good) - 1000], r"lie outside the data section")
    add("ck_not_an_object", "checkpoint", ck, safetensors(None, b"", b"[1, 2]"), r"header does not start with '\{'")
    add("ck_invalid_json", "checkpoint", ck, safetensors(None, b"", b'{"a": '), r"invalid JSON header")
    add("ck_bad_utf8_header", "checkpoint", ck, safetensors(None, b"", b'{"\xff": 1}'), r"invalid JSON header")
    add("ck_duplicate_key", "checkpoint", ck, safetensors(None, bytes(8),
        b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
        b'"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'), r"duplicate key 'a'")
    add("ck_unsupported_dtype", "checkpoint", ck,
        edited(lambda h: h[first].__setitem__("dtype", "U16")), r"unsupported dtype \"U16\"")
    add("ck_lying_shape", "checkpoint", ck,
        edited(lambda h: h[first].__setitem__("shape", [h[first]["shape"][0] + 1] + h[first]["shape"][1:])),
        r"needs \d+ bytes but data_offsets")
    add("ck_overlapping_offsets", "checkpoint", ck,
        safetensors({"a": f32([2], 0, 8), "b": f32([2], 4, 12)}, bytes(12)), r"overlap tensor 'a'")
    add("ck_hole_between_tensors", "checkpoint", ck,
        safetensors({"a": f32([1], 0, 4), "b": f32([1], 8, 12)}, bytes(12)), r"bytes \[4, 8\) of the data section belong to no tensor")
    add("ck_trailing_bytes", "checkpoint", ck, good + bytes(8), r"data section is \d+ bytes but the tensors cover")
    add("ck_offsets_outside", "checkpoint", ck,
        safetensors({"a": f32([1000], 0, 4000)}, bytes(8)), r"data_offsets \[0, 4000\] lie outside the data section \(8 bytes\)")
    add("ck_negative_shape", "checkpoint", ck, safetensors({"a": f32([-1], 0, 0)}, b""), r"must hold non-negative integers")
    add("ck_metadata_not_string", "checkpoint", ck, edited(set_meta("epoch_done", 3)), r"metadata 'epoch_done' is not a string")
    add("ck_not_a_checkpoint", "checkpoint", ck, safetensors({"a": f32([2], 0, 8)}, bytes(8)),
        r"not an anvil checkpoint")
    add("ck_format_version_2", "checkpoint", ck, edited(set_meta("anvil.format_version", "2")),
        r"checkpoint format version 2, this build reads version 1")
    add("ck_corrupt_generator", "checkpoint", ck, edited(set_meta("anvil.rng.default", "1 2 3")),
        r"'anvil\.rng\.default': Generator::set_state")
    dropout = sorted(k for k in meta if k.startswith("anvil.module."))
    assert dropout, "the base checkpoint has no module state (a Dropout generator)"
    add("ck_corrupt_dropout_generator", "checkpoint", ck,
        edited(set_meta(dropout[0], meta[dropout[0]] + " junk")), r"generator: Generator::set_state")
    add("ck_optimizer_option_not_a_number", "checkpoint", ck, edited(set_meta("optim.lr", "fast")), r"lr")
    add("ck_directory", "checkpoint", ck, DIRECTORY, r"is a directory")
    add("ck_fifo", "checkpoint", ck, FIFO, r"not a regular file \(a FIFO\)")
    return out


def labels20():
    return bytes(i % 10 for i in range(20))


# ---- building and running ------------------------------------------------------------------------

def make_cases(root):
    bases = base_paths(root)
    rows = []
    for cid, kind, rel, content, pattern in cases(bases):
        base = os.path.dirname(bases[kind]) if kind == "checkpoint" else bases[kind]
        d = f"{root}/cases/{cid}"
        shutil.copytree(base, d)
        target = f"{d}/{rel}"
        if os.path.exists(target):
            os.remove(target)
        if content is DIRECTORY:
            os.makedirs(target)
        elif content is FIFO:
            os.mkfifo(target)
        elif content is DEV_ZERO:
            os.symlink("/dev/zero", target)
        else:
            write(target, content)
        rows.append((cid, kind, target, d, pattern))
    with open(f"{root}/manifest.tsv", "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")


def build(root, anvil):
    """Generates the corpus in child processes, so that this driver stays small: a child's
    ru_maxrss counts the parent's pages it was forked with, until its exec."""
    subprocess.run([sys.executable, __file__, "generate", "bases", root], check=True)
    base_rss_mb = run_base_checkpoint(root, anvil)
    subprocess.run([sys.executable, __file__, "generate", "cases", root], check=True)
    rows = [tuple(line.rstrip("\n").split("\t")) for line in open(f"{root}/manifest.tsv")]
    return base_paths(root), base_rss_mb, rows


def fingerprint(root):
    """Every regular file under root: size, mtime and SHA-256 (FIFOs, links, devices skipped)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[p] = (st.st_size, st.st_mtime_ns, h.hexdigest())
    return out


def cli_args(kind, bases, d, target):
    if kind == "checkpoint":
        return ["--dataset", bases["mnist"], "--epochs", "2", "--resume", target] + MNIST_ARGS
    model = {"mnist": "mlp_mnist", "cifar": "cnn_cifar", "imdb": "lstm_imdb", "ptb": "ptb_small"}[kind]
    return ["--model", model, "--dataset", d, "--epochs", "1", "--batch", "8", "--threads", "1"]


def run_cli(anvil, bases, base_rss_mb, rows, root):
    failures = 0
    max_rss_mb = base_rss_mb + CLI_RSS_SLACK_MB
    print(f"peak RSS bound: {max_rss_mb:.0f} MB (the valid run's {base_rss_mb:.0f} MB + {CLI_RSS_SLACK_MB})")
    for cid, kind, target, d, pattern in rows:
        out = f"{root}/out/{cid}.safetensors"
        cmd = [anvil, "train"] + cli_args(kind, bases, d, target) + ["--checkpoint", out]
        code, err, rss_mb, timed_out = run_measured(cmd, f"{root}/out/{cid}")
        if timed_out:
            print(f"FAIL {cid}: no answer in 60 s")
            failures += 1
            continue
        lines = err.splitlines()
        problems = []
        if code == 0:
            problems.append("exit status 0")
        if len(lines) != 1 or not lines[0].startswith("anvil: error: "):
            problems.append(f"stderr is not one 'anvil: error:' line: {err!r}")
        elif target not in lines[0]:
            problems.append(f"the error does not name {target}: {lines[0]}")
        elif not re.search(pattern, lines[0]):
            problems.append(f"the error does not match /{pattern}/: {lines[0]}")
        if rss_mb > max_rss_mb:
            problems.append(f"peak RSS {rss_mb:.0f} MB > {max_rss_mb:.0f} MB")
        if os.path.exists(out):
            problems.append(f"wrote {out}")
        if problems:
            failures += 1
            print(f"FAIL {cid}: " + "; ".join(problems))
        else:
            print(f"ok {cid} ({rss_mb:.0f} MB): {lines[0][:160]}")
    return failures


def run_measured(cmd, stem):
    """Runs cmd; returns (exit code, stderr text, peak RSS in MB from wait4, timed out). The RSS
    is an upper bound of the child's own peak: ru_maxrss counts the pages the child inherited
    from this process until its exec (which is why the corpus is generated in other processes)."""
    with open(stem + ".out", "wb") as out, open(stem + ".err", "wb") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        timer = threading.Timer(60, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
    text = open(stem + ".err", "rb").read().decode(errors="replace")
    killed = p.returncode == -9
    return p.returncode, text, usage.ru_maxrss / 1024.0, killed


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "generate":  # build()'s child processes
        make_bases(sys.argv[3]) if sys.argv[2] == "bases" else make_cases(sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("mode", choices=["readers", "cli"])
    ap.add_argument("program", help="check_malformed_readers (readers) or anvil (cli)")
    ap.add_argument("--anvil", help="the anvil CLI (readers mode: writes the base checkpoint)")
    ap.add_argument("--keep", action="store_true", help="keep the corpus folder")
    a = ap.parse_args()
    anvil = a.program if a.mode == "cli" else a.anvil
    if not anvil:
        sys.exit("malformed_corpus: readers mode needs --anvil")
    root = tempfile.mkdtemp(prefix="anvil_malformed_")
    try:
        bases, base_rss_mb, rows = build(root, anvil)
        kinds = sorted({r[1] for r in rows})
        print(f"malformed corpus: {len(rows)} cases ({', '.join(f'{k} {sum(r[1] == k for r in rows)}' for k in kinds)}) in {root}")
        watched = [f"{root}/base", f"{root}/cases"]
        before = {k: v for w in watched for k, v in fingerprint(w).items()}
        if a.mode == "cli":
            os.makedirs(f"{root}/out")
            failures = run_cli(anvil, bases, base_rss_mb, rows, root)
        else:
            failures = subprocess.run([a.program, f"{root}/manifest.tsv"]).returncode
        after = {k: v for w in watched for k, v in fingerprint(w).items()}
        changed = [p for p in before if after.get(p) != before[p]] + [p for p in after if p not in before]
        for p in changed:
            print(f"FAIL: {p} was changed or created")
        if failures or changed:
            print(f"malformed corpus: FAILED ({failures} case(s), {len(changed)} file(s) changed)")
            return 1
        print(f"malformed corpus: all {len(rows)} cases refused cleanly ({a.mode})")
        return 0
    finally:
        if a.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
