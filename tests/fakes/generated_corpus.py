"""A corpus of any size, written from word lists: topical pages in English, some in Chinese, and
some pages also saved as their plain-text source (near-duplicates of the HTML page).

Every sentence is assembled here from small vocabularies by a seeded random generator, so the
same arguments always write the same bytes; nothing is copied from anywhere. Each page lives in a
folder named for its topic, so a benchmark can tell whether a hit is on topic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

# topic -> (nouns, verbs, adjectives): enough for pages of one subject to share vocabulary.
ENGLISH: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "databases": (("transaction", "index", "query", "table", "lock", "replica", "snapshot",
                   "write-ahead log", "schema", "cursor", "checkpoint", "row"),
                  ("commits", "scans", "locks", "replicates", "rolls back", "flushes",
                   "compacts", "isolates"),
                  ("concurrent", "durable", "isolated", "columnar", "indexed", "stale",
                   "consistent", "partitioned")),
    "gardening": (("compost", "seedling", "soil", "mulch", "trellis", "greenhouse", "root",
                   "pruning shear", "bed", "tomato", "aphid", "watering can"),
                  ("waters", "prunes", "feeds", "shades", "transplants", "germinates",
                   "fertilises", "weeds"),
                  ("loamy", "shaded", "frost-hardy", "organic", "raised", "damp", "sunny",
                   "perennial")),
    "astronomy": (("telescope", "galaxy", "nebula", "orbit", "eclipse", "comet", "planet",
                   "star cluster", "redshift", "observatory", "meteor", "lens"),
                  ("observes", "orbits", "eclipses", "refracts", "tracks", "collapses",
                   "emits", "magnifies"),
                  ("distant", "luminous", "faint", "elliptical", "binary", "cosmic", "lunar",
                   "infrared")),
    "cooking": (("broth", "skillet", "dough", "marinade", "oven", "spice", "sauce", "knife",
                 "simmer", "recipe", "butter", "onion"),
                ("braises", "kneads", "seasons", "roasts", "whisks", "reduces", "sears",
                 "chops"),
                ("savory", "crispy", "tender", "aromatic", "caramelised", "fresh", "smoky",
                 "golden")),
    "networking": (("packet", "router", "socket", "handshake", "latency", "firewall",
                    "subnet", "gateway", "bandwidth", "protocol", "switch", "datagram"),
                   ("routes", "forwards", "drops", "retransmits", "encrypts", "throttles",
                    "resolves", "buffers"),
                   ("encrypted", "congested", "lossy", "wireless", "redundant", "secure",
                    "multicast", "idle")),
    "cycling": (("chain", "derailleur", "saddle", "cassette", "brake pad", "tyre", "frame",
                 "crank", "spoke", "helmet", "pedal", "handlebar"),
                ("shifts", "brakes", "climbs", "pedals", "lubricates", "inflates", "corners",
                 "descends"),
                ("carbon", "rusty", "tubeless", "steep", "lightweight", "muddy", "worn",
                 "aerodynamic")),
}
CHINESE: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "databases": (("数据库", "事务", "索引", "日志", "锁", "副本", "查询", "快照"),
                  ("处理", "提交", "回滚", "写入", "复制", "扫描"),
                  ("并发的", "持久的", "一致的", "隔离的")),
    "gardening": (("花园", "土壤", "堆肥", "种子", "幼苗", "温室", "根系", "番茄"),
                  ("浇灌", "修剪", "移栽", "施肥", "发芽", "遮阴"),
                  ("肥沃的", "潮湿的", "有机的", "耐寒的")),
    "astronomy": (("望远镜", "星系", "行星", "轨道", "彗星", "星云", "天文台", "流星"),
                  ("观测", "环绕", "发光", "追踪", "放大", "坍缩"),
                  ("遥远的", "明亮的", "暗淡的", "椭圆的")),
}
_EN_TEMPLATES = (
    "The {a1} {n1} {v1} the {n2} before the {n3} is {a2}.",
    "When a {n1} {v1} every {n2}, the {a1} {n3} stays {a2}.",
    "Each {a1} {n1} usually {v1} a {n2} and then {v2} the {n3}.",
    "A {n1} that {v1} too often makes the {n2} {a1}.",
    "Experts say the {n1} {v1} the {a1} {n2} while the {n3} {v2} slowly.",
)
_ZH_TEMPLATES = (
    "{a1}{n1}会{v1}{n2}，然后{v2}{n3}。",
    "当{n1}{v1}{n2}时，{n3}保持{a1}状态。",
    "每个{n1}都需要{v1}{a1}{n2}。",
    "{n1}在{v1}之前先{v2}{n2}。",
)


@dataclass(frozen=True)
class Page:
    path: str  # relative to the corpus root
    topic: str
    language: str  # "en" or "zh"
    duplicate_of: str | None = None  # the HTML page this plain-text copy repeats


def sentence(rng: random.Random, vocab: tuple[tuple[str, ...], ...], templates: tuple[str, ...]
             ) -> str:
    nouns, verbs, adjectives = vocab
    words = {f"n{i}": rng.choice(nouns) for i in (1, 2, 3)}
    words |= {f"v{i}": rng.choice(verbs) for i in (1, 2)}
    words |= {f"a{i}": rng.choice(adjectives) for i in (1, 2)}
    return rng.choice(templates).format(**words)


def page_text(rng: random.Random, topic: str, language: str, paragraphs: int
              ) -> tuple[str, list[str]]:
    """(title, paragraphs) of one generated page."""
    vocab = (CHINESE if language == "zh" else ENGLISH)[topic]
    templates = _ZH_TEMPLATES if language == "zh" else _EN_TEMPLATES
    joiner = "" if language == "zh" else " "
    title = (f"{rng.choice(vocab[0])}与{rng.choice(vocab[0])}" if language == "zh"
             else f"Notes on the {rng.choice(vocab[2])} {rng.choice(vocab[0])}")
    body = [joiner.join(sentence(rng, vocab, templates) for _ in range(rng.randint(4, 7)))
            for _ in range(paragraphs)]
    return title, body


def html_page(title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<!doctype html><html><head><title>{title}</title></head><body>\n"
            "<nav><a href=\"/\">Home</a> <a href=\"/topics\">Topics</a></nav>\n"
            f"<article><h1>{title}</h1>\n{body}\n</article>\n"
            "<footer>Generated page. All rights reserved.</footer></body></html>\n")


def text_page(title: str, paragraphs: list[str]) -> str:
    return title + "\n\n" + "\n\n".join(paragraphs) + "\n"


def write_corpus(root: Path, pages: int, *, chinese_every: int = 20, copy_every: int = 20,
                 paragraphs: int = 6, seed: int = 0) -> list[Page]:
    """Write `pages` HTML pages under root/<topic>/ (every chinese_every-th in Chinese) and, for
    every copy_every-th page, its text as a .txt next to it; return what was written."""
    rng = random.Random(seed)
    written: list[Page] = []
    en_topics, zh_topics = sorted(ENGLISH), sorted(CHINESE)
    for i in range(pages):
        language = "zh" if chinese_every and i % chinese_every == chinese_every - 1 else "en"
        topics = zh_topics if language == "zh" else en_topics
        topic = topics[i % len(topics)]
        title, body = page_text(rng, topic, language, paragraphs)
        folder = root / topic
        folder.mkdir(parents=True, exist_ok=True)
        name = f"page-{i:05d}"
        (folder / f"{name}.html").write_text(html_page(title, body), encoding="utf-8")
        html_rel = f"{topic}/{name}.html"
        written.append(Page(html_rel, topic, language))
        if copy_every and i % copy_every == 0:
            (folder / f"{name}.txt").write_text(text_page(title, body), encoding="utf-8")
            written.append(Page(f"{topic}/{name}.txt", topic, language, duplicate_of=html_rel))
    return written
