"""The extractive report's own sentences, in the report's language (English for any language
without a table): its title, the notice under it, the comparison table's first column, the
coverage conclusion and the recommendation's lead. The engine quotes sources; these are the
only words it writes."""

from __future__ import annotations

import re

WORDS: dict[str, dict[str, str]] = {
    "en": {"title": "Research report: {topic}", "dimension": "Dimension",
           "notice": "Extractive offline report: assembled by researchflow's offline engine from "
                     "verbatim sentences of the sources below. It is not model-written prose; "
                     "set an LLM key for a written report.",
           "coverage": "Quoted evidence answers {answered} of {total} sub-questions; "
                       "{corroborated} claims are supported by more than one page.",
           "open": " Still open (no quoted evidence): {questions}.", "join": "; ",
           "choose": "What the sources say about when to choose each option:",
           "followup": "What do the sources say about {query}?"},
    "zh": {"title": "研究报告：{topic}", "dimension": "维度",
           "notice": "离线摘录式报告：由 researchflow 的离线引擎把下列来源中的原句逐字摘录组合而成，"
                     "并非模型撰写的文字；如需成文的报告，请设置 LLM 密钥。",
           "coverage": "引用的证据回答了 {total} 个子问题中的 {answered} 个；{corroborated} 条结论"
                       "有不止一个页面支持。",
           "open": "尚无引用证据的问题：{questions}。", "join": "；",
           "choose": "来源中关于何时选择各个选项的说法：",
           "followup": "来源中关于“{query}”是怎么说的？"},
    "ja": {"title": "調査レポート：{topic}", "dimension": "観点",
           "notice": "抽出型オフラインレポート：researchflow のオフラインエンジンが、以下の出典の文を"
                     "そのまま引用して組み立てたものです。モデルが書いた文章ではありません。文章で"
                     "書かれたレポートには LLM のキーを設定してください。",
           "coverage": "引用された根拠は {total} 個の下位質問のうち {answered} 個に答えています。"
                       "{corroborated} 件の主張は複数のページに裏付けられています。",
           "open": "引用された根拠がまだない質問：{questions}。", "join": "／",
           "choose": "各選択肢をいつ選ぶべきかについて、出典が述べていること：",
           "followup": "出典は「{query}」について何と述べていますか？"},
    "ko": {"title": "연구 보고서: {topic}", "dimension": "관점",
           "notice": "추출형 오프라인 보고서: researchflow의 오프라인 엔진이 아래 출처의 문장을 그대로 "
                     "인용해 구성했습니다. 모델이 작성한 글이 아닙니다. 글로 작성된 보고서가 필요하면 "
                     "LLM 키를 설정하세요.",
           "coverage": "인용된 근거가 하위 질문 {total}개 중 {answered}개에 답합니다. "
                       "{corroborated}개의 주장은 둘 이상의 페이지가 뒷받침합니다.",
           "open": " 아직 인용된 근거가 없는 질문: {questions}.", "join": "; ",
           "choose": "각 선택지를 언제 골라야 하는지에 대해 출처가 말하는 내용:",
           "followup": "출처는 '{query}'에 대해 무엇이라고 말합니까?"},
}


def words(language: str | None) -> dict[str, str]:
    primary = re.split(r"[-_]", (language or "en").strip().lower(), maxsplit=1)[0]
    return WORDS.get(primary, WORDS["en"])


def notice_of(engine: object, language: str | None) -> str | None:
    """The notice a report by `engine` in `language` carries: the engine's own words in that
    language when it has them (the offline engine), else its fixed notice, if any."""
    say = getattr(engine, "notice_for", None)
    return say(language) if say else getattr(engine, "notice", None)
