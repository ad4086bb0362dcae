"""The extractive report's own sentences, in the report's language (English for any language
without a table): its title, the comparison table's first column, the coverage conclusion and
the recommendation's lead. The engine quotes sources; these are the only words it writes."""

from __future__ import annotations

import re

WORDS: dict[str, dict[str, str]] = {
    "en": {"title": "Research report: {topic}", "dimension": "Dimension",
           "coverage": "Quoted evidence answers {answered} of {total} sub-questions; "
                       "{corroborated} claims are supported by more than one page.",
           "open": " Still open (no quoted evidence): {questions}.", "join": "; ",
           "choose": "What the sources say about when to choose each option:"},
    "zh": {"title": "研究报告：{topic}", "dimension": "维度",
           "coverage": "引用的证据回答了 {total} 个子问题中的 {answered} 个；{corroborated} 条结论"
                       "有不止一个页面支持。",
           "open": "尚无引用证据的问题：{questions}。", "join": "；",
           "choose": "来源中关于何时选择各个选项的说法："},
    "ja": {"title": "調査レポート：{topic}", "dimension": "観点",
           "coverage": "引用された根拠は {total} 個の下位質問のうち {answered} 個に答えています。"
                       "{corroborated} 件の主張は複数のページに裏付けられています。",
           "open": "引用された根拠がまだない質問：{questions}。", "join": "／",
           "choose": "各選択肢をいつ選ぶべきかについて、出典が述べていること："},
    "ko": {"title": "연구 보고서: {topic}", "dimension": "관점",
           "coverage": "인용된 근거가 하위 질문 {total}개 중 {answered}개에 답합니다. "
                       "{corroborated}개의 주장은 둘 이상의 페이지가 뒷받침합니다.",
           "open": " 아직 인용된 근거가 없는 질문: {questions}.", "join": "; ",
           "choose": "각 선택지를 언제 골라야 하는지에 대해 출처가 말하는 내용:"},
}


def words(language: str | None) -> dict[str, str]:
    primary = re.split(r"[-_]", (language or "en").strip().lower(), maxsplit=1)[0]
    return WORDS.get(primary, WORDS["en"])
