"""Audio for the speech tests, made at test time from pocketsphinx-testdata's LibriVox read speech: five sentences
with pauses between them, encoded with ffmpeg as m4a (AAC) and webm (Opus), and their reference text."""
import os
import re
import shutil
import subprocess
import wave

import pytest

LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox"
SENTENCES = ["sense_and_sensibility_01_austen_64kb-%s" % n for n in ("0870", "0880", "0890", "0920", "0930")]
RATE = 16000
LEAD_S, GAP_S = 0.5, 1.2


class SpeechAudio:
    def __init__(self, m4a, webm, duration_ms, reference):
        self.m4a, self.webm, self.duration_ms, self.reference = m4a, webm, duration_ms, reference

    def upstream_args(self):
        return ["--audio-m4a", self.m4a, "--audio-webm", self.webm, "--audio-duration-ms", str(self.duration_ms)]


def make(dirpath):
    """Builds the audio files in dirpath; skips the test when the tools or the test data are missing."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg (Debian package ffmpeg) is not installed")
    if not os.path.isdir(LIBRIVOX):
        pytest.skip("pocketsphinx-testdata is not installed (%s missing)" % LIBRIVOX)
    refs = {}
    with open(os.path.join(LIBRIVOX, "transcription")) as f:
        for line in f:
            m = re.match(r"<s> (.*) </s> \((\S+)\)", line.strip())
            if m:
                refs[m.group(2)] = m.group(1)
    pcm = bytearray(b"\0\0" * int(LEAD_S * RATE))
    for name in SENTENCES:
        with wave.open(os.path.join(LIBRIVOX, name + ".wav")) as w:
            assert (w.getnchannels(), w.getframerate(), w.getsampwidth()) == (1, RATE, 2)
            pcm += w.readframes(w.getnframes())
        pcm += b"\0\0" * int(GAP_S * RATE)
    wav = os.path.join(dirpath, "speech.wav")
    with wave.open(wav, "wb") as w:
        w.setnchannels(1)
        w.setframerate(RATE)
        w.setsampwidth(2)
        w.writeframes(bytes(pcm))
    m4a, webm = os.path.join(dirpath, "speech.m4a"), os.path.join(dirpath, "speech.webm")
    for out, codec in ((m4a, ["-c:a", "aac", "-b:a", "64k"]), (webm, ["-c:a", "libopus", "-b:a", "48k"])):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", wav, "-ar", "48000", "-ac", "2", *codec, out],
                       check=True, timeout=120)
    duration_ms = len(pcm) // 2 * 1000 // RATE
    return SpeechAudio(m4a, webm, duration_ms, " ".join(refs[s] for s in SENTENCES))


def word_error_rate(reference, hypothesis):
    """Levenshtein distance over words, divided by the reference's length."""
    ref, hyp = reference.lower().split(), re.sub(r"[^a-z' ]", " ", hypothesis.lower()).split()
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1] / len(ref)


def check_segments(segments, duration_s):
    """Segments are ordered, do not overlap, and lie within the audio."""
    assert segments, "no segments"
    end = 0.0
    for s in segments:
        assert set(s) == {"text", "start", "duration"}, s
        assert s["text"].strip() == s["text"] and s["text"], s
        assert s["start"] >= end - 1e-6, "segment %r overlaps the previous one (ends %.3f)" % (s, end)
        assert s["duration"] >= 0
        end = s["start"] + s["duration"]
    assert end <= duration_s + 0.05, "segments run to %.3f s past the audio's %.3f s" % (end, duration_s)
