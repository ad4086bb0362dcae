"""Topical corpora for end-to-end tests of the offline engine, written on the spot.

`write_corpus(folder, "en" | "zh")` writes a small folder of HTML pages about one comparison —
two message brokers, Kafka and RabbitMQ — in English or in Chinese, and returns what a test
needs to judge a report over it: the topic to ask, the subject terms a quote on subject names,
and the text of every page.

The pages are assembled here from short fact sentences written for these tests (no text is
copied from anywhere): one page per (broker, aspect) and a page comparing both — the pages on
subject — then pages off subject that a search by words alone finds too: distractors about
unrelated things (parcel couriers, sourdough, telescopes) that share the generic words of the
planner's comparison questions (design, performance, delivery, errors, limits), and traps that
also share a name: the writer Franz Kafka's letters, rabbits queueing at a feeding station. A
report that quotes them is off subject, so a test over this corpus can fail.

A seeded random choice adds filler sentences and shuffles them, so the same seed always writes
the same bytes (the determinism test relies on it) while different seeds write different pages.
"""

from __future__ import annotations

import html
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

Language = Literal["en", "zh"]


@dataclass(frozen=True)
class TopicalCorpus:
    root: Path
    language: Language
    topic: str  # a comparison the demo corpus and its topics do not contain
    subject: tuple[str, ...]  # the options compared
    pages: dict[str, str]  # file name -> the page's text, as a reader sees it
    on_subject_pages: frozenset[str]  # file names of the pages about the brokers

    def on_subject(self, url: str) -> bool:
        """Whether a citation's URL is one of the pages about the brokers."""
        return Path(unquote(urlsplit(url).path)).name in self.on_subject_pages

    def names_subject(self, text: str) -> bool:
        """Whether `text` names a subject term (Latin terms at a word start, any case)."""
        return any(re.search(rf"(?<![A-Za-z]){re.escape(t)}", text, re.I) for t in self.subject)


# (aspect title, {broker: fact sentences}) per language. Each sentence names its broker, so a
# quote taken from a broker's page is on subject whichever sentence the engine picks.
_FACTS: dict[Language, tuple[tuple[str, dict[str, tuple[str, ...]]], ...]] = {
    "en": (
        ("design and purpose", {
            "Kafka": (
                "Kafka stores every message in a partitioned log on disk, and consumers read "
                "that log at their own pace by remembering an offset.",
                "Kafka was designed as a durable event stream, so a message stays in the log "
                "after it has been read and can be read again by a new consumer.",
                "In Kafka a topic is split into partitions, and each partition is an ordered, "
                "append-only sequence of records."),
            "RabbitMQ": (
                "RabbitMQ is a message broker that routes each message through an exchange into "
                "one or more queues, and a message leaves the queue once a consumer acknowledges it.",
                "RabbitMQ was designed around flexible routing, with direct, topic, fanout and "
                "headers exchanges deciding where each message goes.",
                "In RabbitMQ the broker pushes messages to consumers and keeps track of which "
                "deliveries are still waiting for an acknowledgement."),
        }),
        ("performance and scalability", {
            "Kafka": (
                "Kafka reaches high throughput by writing to the log sequentially and by sending "
                "records to consumers in large batches.",
                "Kafka scales out by adding partitions and brokers, and one consumer group can "
                "read different partitions in parallel.",
                "Because Kafka batches records, a single message may wait a few milliseconds "
                "before it is sent, trading latency for throughput."),
            "RabbitMQ": (
                "RabbitMQ delivers individual messages with low latency, which suits task queues "
                "where each job should start as soon as it arrives.",
                "RabbitMQ throughput drops when queues grow long, because the broker must keep "
                "track of many unacknowledged messages.",
                "RabbitMQ scales by spreading queues over the nodes of a cluster, and quorum "
                "queues replicate each queue to several nodes."),
        }),
        ("delivery guarantees and ordering", {
            "Kafka": (
                "Kafka keeps messages in order within a partition, but not across the partitions "
                "of a topic.",
                "Kafka producers can enable idempotence so that a retried send does not write a "
                "duplicate record to the partition.",
                "Kafka consumers get at-least-once delivery when they commit their offset only "
                "after the work for a record is done."),
            "RabbitMQ": (
                "RabbitMQ redelivers a message when its consumer disconnects before acknowledging "
                "it, so consumers must tolerate duplicates.",
                "RabbitMQ publisher confirms tell the producer that the broker has safely "
                "accepted a message.",
                "RabbitMQ preserves the order of messages in one queue, but a redelivered message "
                "can arrive after newer ones."),
        }),
        ("error handling and limits", {
            "Kafka": (
                "Kafka has no built-in dead letter queue, so a consumer that cannot process a "
                "record usually writes it to a separate topic itself.",
                "Kafka deletes old log segments after the retention period, and a consumer that "
                "falls behind for longer than that loses those records.",
                "Kafka rebalances a consumer group when a member joins or leaves, and partitions "
                "pause briefly while they are reassigned."),
            "RabbitMQ": (
                "RabbitMQ can route a rejected or expired message to a dead letter exchange, "
                "where it waits for inspection.",
                "RabbitMQ applies flow control to publishers when a node runs short of memory or "
                "disk space.",
                "RabbitMQ limits a queue with a maximum length, after which it drops or "
                "dead-letters the oldest messages."),
        }),
    ),
    "zh": (
        ("设计与用途", {
            "Kafka": (
                "Kafka 把每条消息写入磁盘上分区的日志，消费者通过记录偏移量按自己的节奏读取。",
                "Kafka 被设计成持久的事件流，消息被读取之后仍然保留在日志中，新的消费者还可以重新读取。",
                "在 Kafka 中，一个主题被划分为多个分区，每个分区都是有序、只追加的记录序列。"),
            "RabbitMQ": (
                "RabbitMQ 是一个消息代理，它通过交换机把每条消息路由到一个或多个队列，消费者确认之后消息才离开队列。",
                "RabbitMQ 的设计重点是灵活的路由，direct、topic、fanout 和 headers 四种交换机决定消息的去向。",
                "在 RabbitMQ 中，代理主动把消息推送给消费者，并记录哪些投递还在等待确认。"),
        }),
        ("性能与扩展", {
            "Kafka": (
                "Kafka 依靠顺序写日志和大批量发送记录来获得很高的吞吐量。",
                "Kafka 通过增加分区和代理节点来横向扩展，同一个消费者组可以并行读取不同的分区。",
                "由于 Kafka 会把记录攒成批次，单条消息可能要等几毫秒才被发送，用延迟换取吞吐量。"),
            "RabbitMQ": (
                "RabbitMQ 投递单条消息的延迟很低，适合任务一到就要开始处理的工作队列。",
                "当队列变得很长时，RabbitMQ 需要跟踪大量未确认的消息，吞吐量会随之下降。",
                "RabbitMQ 通过把队列分布到集群的各个节点上来扩展，仲裁队列会把每个队列复制到多个节点。"),
        }),
        ("投递保证与顺序", {
            "Kafka": (
                "Kafka 只保证同一个分区内的消息有序，不保证一个主题的不同分区之间的顺序。",
                "Kafka 生产者可以开启幂等性，这样重试发送时不会在分区中写入重复的记录。",
                "Kafka 消费者如果在处理完一条记录之后才提交偏移量，就得到至少一次的投递语义。"),
            "RabbitMQ": (
                "如果消费者在确认之前断开连接，RabbitMQ 会重新投递这条消息，因此消费者必须能处理重复消息。",
                "RabbitMQ 的发布确认机制会告诉生产者，代理已经安全地接收了消息。",
                "RabbitMQ 保持单个队列内消息的顺序，但被重新投递的消息可能排在更新的消息之后。"),
        }),
        ("错误处理与限制", {
            "Kafka": (
                "Kafka 没有内置的死信队列，无法处理某条记录的消费者通常要自己把它写到另一个主题。",
                "Kafka 会在保留期过后删除旧的日志段，落后时间超过保留期的消费者会丢失这些记录。",
                "当有成员加入或离开时，Kafka 会对消费者组进行再平衡，分区在重新分配期间会短暂暂停。"),
            "RabbitMQ": (
                "RabbitMQ 可以把被拒绝或过期的消息转到死信交换机，留待之后检查。",
                "当某个节点内存或磁盘空间不足时，RabbitMQ 会对发布者进行流量控制。",
                "RabbitMQ 可以为队列设置最大长度，超过之后会丢弃最旧的消息或把它们转为死信。"),
        }),
    ),
}

_COMPARE: dict[Language, tuple[str, tuple[str, ...]]] = {
    "en": ("Kafka or RabbitMQ: choosing a broker", (
        "Kafka suits event streams that several services replay, while RabbitMQ suits work "
        "queues where each task is handled once.",
        "Kafka keeps messages after they are read and RabbitMQ removes them on acknowledgement, "
        "which is the main difference in how the two brokers store data.",
        "For routing by message attributes RabbitMQ offers exchanges, whereas Kafka leaves "
        "routing to the producer's choice of topic and partition.")),
    "zh": ("Kafka 还是 RabbitMQ：如何选择消息中间件", (
        "Kafka 适合需要被多个服务重放的事件流，而 RabbitMQ 适合每个任务只处理一次的工作队列。",
        "Kafka 在消息被读取之后仍然保留它，RabbitMQ 则在确认之后删除消息，这是两者存储数据方式的主要区别。",
        "按消息属性路由时 RabbitMQ 提供交换机，而 Kafka 把路由交给生产者对主题和分区的选择。")),
}

# Pages that share the comparison questions' generic words and never name a broker.
_DISTRACTORS: dict[Language, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "en": (
        ("Parcel delivery performance", (
            "Courier delivery performance depends on how vans are routed between depots and how "
            "many parcels each driver carries.",
            "A failed delivery is retried the next working day, and after three attempts the "
            "parcel returns to the sender.",
            "Depots scale for the holiday peak by hiring seasonal drivers and adding evening "
            "routes.")),
        ("Sourdough starter design", (
            "A sourdough starter is a culture of wild yeast and bacteria that needs flour and "
            "water every day.",
            "The main error bakers make is feeding the starter too little, which leaves the "
            "bread dense and sour.",
            "Kept in the fridge, a starter can wait a week between feedings without losing its "
            "strength.")),
        ("Telescope mounts and their limits", (
            "An equatorial telescope mount follows the stars by turning around one axis parallel "
            "to the earth's axis.",
            "The limitation of a cheap mount is vibration, which blurs the image at high "
            "magnification.",
            "Observers compare mounts by the weight they can carry and how smoothly they track.")),
    ),
    "zh": (
        ("包裹投递的效率", (
            "快递的投递效率取决于货车在网点之间的路线安排，以及每位司机承担的包裹数量。",
            "投递失败的包裹会在下一个工作日重新派送，三次失败之后退回寄件人。",
            "为了应对节日高峰，网点会招聘临时司机并增加晚间路线来扩展运力。")),
        ("酸面种的设计与养护", (
            "酸面种是野生酵母和细菌的培养物，每天都需要加入面粉和水来喂养。",
            "烘焙者最常见的错误是喂养不足，这会让面包又硬又酸。",
            "放在冰箱里的酸面种可以一周喂养一次而不失去活力。")),
        ("望远镜支架的限制", (
            "赤道式望远镜支架绕一根与地轴平行的轴转动，以跟踪星星的运动。",
            "廉价支架的主要限制是振动，在高倍率下会让图像变得模糊。",
            "观测者比较支架时，看的是它能承载的重量以及跟踪是否平稳。")),
    ),
}

# Off subject, but sharing a name with a broker as well as the questions' generic words.
_TRAPS: dict[Language, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "en": (
        ("Franz Kafka's letters and their delivery", (
            "Franz Kafka wrote hundreds of letters, and their delivery by post shaped the design "
            "of his later stories.",
            "Kafka's diaries record the order in which he revised each chapter, and a friend "
            "kept the messages he had asked to have destroyed.",
            "The performance of Kafka's work on stage depends on how directors handle the limits "
            "of his unfinished texts.")),
        ("Raising rabbits: queues at the feeding station", (
            "Rabbits queue at the feeding station in a strict order set by the oldest doe.",
            "A breeder's most common error is delivering too many fresh greens at once, which "
            "upsets young rabbits.",
            "The design of a hutch limits how many rabbits can share one run without fights.")),
    ),
    "zh": (
        ("作家卡夫卡（Kafka）的书信", (
            "作家弗朗茨·卡夫卡（Kafka）写过几百封信，这些信件的投递方式影响了他后期小说的设计。",
            "Kafka 的日记记录了他修改每一章的顺序，他的朋友保留了那些他要求销毁的手稿和消息。",
            "卡夫卡作品在舞台上的表现，取决于导演如何处理他未完成文本的限制。")),
        ("养兔场的排队与投喂", (
            "兔子在喂食站前按照最年长母兔定下的顺序排队。",
            "饲养者最常见的错误是一次投递太多新鲜青菜，这会让幼兔不适。",
            "兔笼的设计限制了一个围栏里能容纳多少只兔子而不打架。")),
    ),
}

# Filler that does not name the broker, as real pages say "it": on subject by its page.
_PLAIN: dict[Language, tuple[str, ...]] = {
    "en": ("Most teams leave this setting at its default until a load test says otherwise.",
           "Watching this closely from the first day saves a lot of debugging later.",
           "The defaults are sensible for a small deployment."),
    "zh": ("大多数团队在压测给出结论之前都保持这个设置的默认值。",
           "从第一天起就密切关注这一点，可以省去之后大量的排查工作。",
           "对于小规模部署，默认配置已经足够合理。"),
}

# Filler that names the broker, so it is on subject yet says little: a ranking that prefers it
# over the facts costs the report its substance, not its subject.
_FILLER: dict[Language, tuple[str, ...]] = {
    "en": ("Teams often revisit this part of {b} when their traffic grows.",
           "The documentation of {b} returns to this point in several chapters.",
           "Operators of {b} tend to learn this the first time a cluster is busy."),
    "zh": ("流量增长之后，团队常常会重新审视 {b} 的这一部分。",
           "{b} 的文档在好几个章节里都会回到这一点。",
           "{b} 的运维人员往往在集群第一次繁忙时才体会到这一点。"),
}

_TOPIC: dict[Language, str] = {
    "en": "Compare Kafka and RabbitMQ for delivering order events between services",
    "zh": "Kafka 和 RabbitMQ 在服务之间投递订单事件时有什么区别？",
}


def write_corpus(folder: Path, language: Language, *, seed: int = 7) -> TopicalCorpus:
    """Write the corpus as HTML pages under `folder` (created) and describe it."""
    rng = random.Random(f"{language}:{seed}")  # str seeds hash stably across processes
    folder.mkdir(parents=True, exist_ok=True)
    pages: dict[str, tuple[str, list[str]]] = {}
    for n, (aspect, facts) in enumerate(_FACTS[language]):
        for broker, sentences in facts.items():
            body = list(sentences) + [f.format(b=broker)
                                      for f in rng.sample(_FILLER[language], 2)]
            body.append(rng.choice(_PLAIN[language]))
            rng.shuffle(body)
            title = f"{broker}: {aspect}" if language == "en" else f"{broker}：{aspect}"
            pages[f"{broker.lower()}-{n}.html"] = (title, body)
    title, sentences = _COMPARE[language]
    pages["compare.html"] = (title, list(sentences))
    on_subject = frozenset(pages)
    for n, (title, sentences) in enumerate(_DISTRACTORS[language] + _TRAPS[language]):
        pages[f"other-{n}.html"] = (title, list(sentences))
    for name, (title, body) in pages.items():
        (folder / name).write_text(_html(title, body, language), encoding="utf-8")
    return TopicalCorpus(root=folder, language=language, topic=_TOPIC[language],
                         subject=("Kafka", "RabbitMQ"), on_subject_pages=on_subject,
                         pages={name: "\n".join([title, *body])
                                for name, (title, body) in pages.items()})


def _html(title: str, sentences: list[str], language: Language) -> str:
    # Two or three sentences a paragraph, as a page would group them.
    paragraphs, i = [], 0
    while i < len(sentences):
        step = 2 if (i // 2) % 2 else 3
        paragraphs.append(" ".join(sentences[i:i + step]) if language == "en"
                          else "".join(sentences[i:i + step]))
        i += step
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    lang = "en" if language == "en" else "zh-CN"
    return (f'<!doctype html>\n<html lang="{lang}"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title></head>\n<body><nav><a href=\"/\">Home</a></nav>"
            f"<article>\n<h1>{html.escape(title)}</h1>\n{body}\n</article>"
            f"<footer>Written for researchflow's tests.</footer></body></html>\n")
