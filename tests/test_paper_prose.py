"""tools/paper_check.py numbers: a number typed in the report's prose is found, with its line;
the allowed forms (NUMBER_FORMS) never are; the committed paper/ passes."""

import importlib.util
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("paper_check", ROOT / "tools" / "paper_check.py")
paper_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper_check)

# Clean prose: words, macros, references, math without values (as the report writes it).
WORDS = ["the", "quadratic", "network", "trains", "at", "rate", "with", "error", "of", "and", "seeds", "each"]
CLEAN = [
    *WORDS,
    r"\cifarcomparisonEpochs{}",
    r"\paperTuningBatch",
    r"Table~\ref{tab:cmp-main}",
    r"\emph{full}",
    r"$\gamma_g=\gamma_b$",
    r"\%",
    "(",
    ")",
    ",",
    ".",
]
# Allowed forms, one generator per entry of NUMBER_FORMS (each holds digits).
n = st.integers(0, 100_000).map(str)
digit = st.integers(0, 9).map(str)
ALLOWED = st.one_of(
    n.map(lambda k: f"% {k} epochs in a comment\n"),
    n.map(lambda k: rf"\label{{fig:a{k}}}"),
    n.map(lambda k: rf"Fig.~\ref{{fig:{k}}}"),
    n.map(lambda k: rf"\cite{{he{k}}}"),
    n.map(lambda k: rf"\input{{tables/t{k}}}"),
    n.map(lambda k: rf"\includegraphics[width=0.{k}\linewidth]{{figures/f{k}.pdf}}"),
    n.map(lambda k: rf"\texttt{{resnet{k}\_32x8d}}"),
    n.map(lambda k: rf"\url{{https://x.org/{k}}}"),
    n.map(lambda k: rf"\setlength{{\tabcolsep}}{{{k}pt}}"),
    n.map(lambda k: rf"\begin{{tabular}}{{p{{0.{k}\textwidth}}r}}x\end{{tabular}}"),
    n.map(lambda k: rf"\vspace{{-{k}pt}}"),
    n.map(lambda k: f"ResNet{k}"),
    n.map(lambda k: f"CIFAR-{k}"),
    n.map(lambda k: f"QResNet-{k}"),
    n.map(lambda k: f"top-{k}"),
    n.map(lambda k: f"bf{k}"),
    n.map(lambda k: f"{k}-bit"),
    n.map(lambda k: f"$l_{{{k}}}$"),
    n.map(lambda k: f"$x^{{{k}}}$"),
    digit.map(lambda k: f"$t_{k}$"),  # (t_100 would print t with subscript 1, then 00)
    n.map(lambda k: f"${k}^{{H-1}}$"),
    digit.map(lambda k: rf"$\gamma={k}$"),
    digit.map(lambda k: rf"${k}\times{k}$"),
    n.map(lambda k: f"${k}n+2$"),
    n.map(lambda k: f"Table~{k}"),
    n.map(lambda k: f"Proposition~{k}"),
    st.integers(1900, 2099).map(lambda y: f"(He et al., {y})"),
    n.map(lambda k: f"depth {k}"),
    n.map(lambda k: f"{k} layers"),
    n.map(lambda k: f"{k}-layer"),
    n.map(lambda k: f"ResNet20/{k}"),
    n.map(lambda k: f"``eval {k}''"),
)
# Typed numbers, as they would be written in prose or math.
TYPED = st.one_of(
    n,
    st.tuples(n, st.integers(0, 99)).map(lambda t: f"{t[0]}.{t[1]:02d}"),
    st.integers(1, 99).map(lambda k: f"0.{k}"),
    st.integers(1000, 999_999).map(lambda k: f"{k:,}".replace(",", "{,}")),
    n.map(lambda k: rf"{k}\%"),
    st.integers(10, 10_000).map(lambda k: f"${k}$"),
    st.integers(1, 9).map(lambda k: f"$10^{{-{k}}}$"),
    st.integers(10, 999).map(lambda k: rf"${k}\times{k}$"),
    n.map(lambda k: f"stride-{k}"),
)
prose = st.lists(st.sampled_from(CLEAN), min_size=1, max_size=30)


def join(tokens):
    """Tokens as TeX prose, a line break every eight tokens."""
    return "\n".join(" ".join(tokens[i : i + 8]) for i in range(0, len(tokens), 8))


@settings(max_examples=300, deadline=None)
@given(prose, st.data(), TYPED)
def test_a_typed_number_is_always_found_with_its_line(words, data, typed):
    at = data.draw(st.integers(0, len(words)))
    tokens = [*words[:at], typed, *words[at:]]
    tex = join(tokens)
    found = paper_check.typed_numbers(tex)
    line = at // 8 + 1
    want = re.findall(r"[0-9]+(?:(?:\{,\}|\.)[0-9]+)*", typed.replace(r"\times", " "))
    got = [(ln, num) for ln, num, _ in found]
    assert got, f"{typed!r} not found in {tex!r}"
    assert all(ln == line for ln, _ in got), (got, line, tex)
    # every number of the typed form is named (the exponent of 10^{-4} is a script, its 10 is named)
    assert {num for _, num in got} >= {w for w in want if not typed.startswith("$10^")} | (
        {"10"} if typed.startswith("$10^") else set()
    )


@settings(max_examples=300, deadline=None)
@given(prose, st.lists(ALLOWED, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_allowed_forms_are_never_found(words, allowed, rnd):
    tokens = list(words)
    for form in allowed:
        tokens.insert(rnd.randint(0, len(tokens)), form)
    tex = join(tokens)
    assert paper_check.typed_numbers(tex) == [], tex


def test_examples():
    found = paper_check.typed_numbers
    assert [n for _, n, _ in found(r"batch 128, weight decay $10^{-4}$, 200 epochs")] == ["128", "10", "200"]
    assert [n for _, n, _ in found("Training runs\non the 23{,}488 images")] == ["23{,}488"]
    assert found(r"within 80\% power, at a $224\times224$ crop")[0][:2] == (1, "80")
    assert found(r"\cifarcomparisonEpochs{} epochs of ResNet56, CIFAR-10 (Section~\ref{sec:a}, 2016)") == []
    assert found("a line % 200 epochs, a comment\n") == []
    assert found(r"\begin{document}x\end{document}")[:1] == []
    # the preamble of a document is not prose; its body is
    assert [n for _, n, _ in found("\\newcommand{\\a}{7}\n\\begin{document}\nat 7 epochs\n")] == ["7"]
    assert found(r"\macro3")[0][1] == "3"  # a macro's end is not a name: \macro3 prints 3


def test_every_allowed_form_is_documented():
    assert set(paper_check.NUMBER_FORMS) >= {"comment", "argument", "length", "name", "script", "formula", "year"}
    assert all(len(reason) > 20 for reason in paper_check.NUMBER_FORMS.values())


def test_the_committed_report_types_no_number():
    found = paper_check.numbers(ROOT / "paper")
    assert not found, "\n".join(found)


def test_the_cli_names_file_line_and_number(tmp_path, capsys):
    (tmp_path / "sections").mkdir()
    (tmp_path / "main.tex").write_text("\\begin{document}\nclean\n\\end{document}\n")
    (tmp_path / "sections" / "a.tex").write_text("one line\ntrained for 15 epochs\n")
    assert paper_check.main(["numbers", "--paper", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "sections/a.tex:2: typed number 15" in err
    (tmp_path / "sections" / "a.tex").write_text("one line\ntrained for \\aEpochs{} epochs\n")
    assert paper_check.main(["numbers", "--paper", str(tmp_path)]) == 0


def test_every_reference_is_cited_and_every_citation_has_an_entry():
    bib = (ROOT / "paper" / "references.bib").read_text()
    entries = set(re.findall(r"^@\w+\{([^,]+),", bib, re.M))
    tex = "".join(p.read_text() for p in [ROOT / "paper" / "main.tex", *(ROOT / "paper" / "sections").glob("*.tex")])
    cited = {k.strip() for keys in re.findall(r"\\cite[pt]?(?:\[[^\]]*\])?\{([^}]*)\}", tex) for k in keys.split(",")}
    assert entries - cited == set(), f"entries no one cites: {sorted(entries - cited)}"
    assert cited - entries == set(), f"citations without an entry: {sorted(cited - entries)}"
    for work in ("fan2023", "kileel2019expressive", "hall1976optimal", "song2021monocular", "bachlechner2020rezero"):
        assert work in entries


def test_a_macro_written_for_no_reader_is_found_and_every_reader_counts(tmp_path):
    """The other half of the macro contract: every macro under paper/variables/ is read by the
    report's LaTeX (its sections, tables, another macro) or by the claim ledger; one read by
    nothing is named with its file."""
    from quadnn_paper.common.ledger import read_variables

    paper = tmp_path / "paper"
    for d in ("variables", "sections", "tables"):
        (paper / d).mkdir(parents=True)
    ledger_read = sorted(n for n in read_variables() if n.startswith("cifartuning"))[0]
    (paper / "variables" / "cifar_tuning.tex").write_text(
        "\\newcommand{\\cifartuningInText}{1}\n"
        "\\newcommand{\\cifartuningInTable}{2}\n"
        "\\newcommand{\\cifartuningInMacro}{3}\n"
        "\\newcommand{\\cifartuningUses}{\\cifartuningInMacro{} and more}\n"
        f"\\newcommand{{\\{ledger_read}}}{{4}}\n"
        "\\newcommand{\\cifartuningOrphan}{5}\n"
        "\\newcommand{\\cifartuningOrphanPrefix}{6}\n"
    )
    (paper / "main.tex").write_text("\\cifartuningUses\n")
    (paper / "sections" / "cifar_tuning.tex").write_text(
        "error \\cifartuningInText{} % a comment mentioning \\cifartuningOrphanPrefixes is another name\n"
    )
    (paper / "tables" / "t.tex").write_text("\\cifartuningInTable \\\\\n")
    found = paper_check.unread_macros(paper)
    assert found == [
        "variables/cifar_tuning.tex: \\cifartuningOrphan is read by nothing",
        "variables/cifar_tuning.tex: \\cifartuningOrphanPrefix is read by nothing",
    ]
    assert paper_check.main(["numbers", "--paper", str(paper)]) == 1
    (paper / "sections" / "cifar_tuning.tex").write_text(
        "\\cifartuningInText \\cifartuningOrphan \\cifartuningOrphanPrefix\n"
    )
    assert paper_check.unread_macros(paper) == [] and paper_check.main(["numbers", "--paper", str(paper)]) == 0
