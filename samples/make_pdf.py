"""Regenerate samples/lighthouses.pdf, the three-page PDF of the sample corpus.

Run from the repository root with the dev dependencies installed:

    .venv/bin/python samples/make_pdf.py

The output is byte-for-byte reproducible (reportlab's invariant mode pins the timestamps and the
document id), so regenerating it leaves git clean unless the text below changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reportlab import rl_config
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

TITLE = "Famous Lighthouses"

# One entry per page: (heading, paragraphs). Each page holds about 1,500 characters of text.
PAGES: list[tuple[str, list[str]]] = [
    (
        "The Pharos of Alexandria",
        [
            "The Pharos of Alexandria was the first great lighthouse of the ancient world and one of the "
            "Seven Wonders of the Ancient World. It stood on the small island of Pharos at the entrance to "
            "the harbour of Alexandria in Egypt. Construction began under Ptolemy I Soter and was finished "
            "under his son Ptolemy II Philadelphus in about 280 BC. The architect is traditionally named as "
            "Sostratus of Cnidus.",
            "Ancient descriptions suggest a tower of three stages: a square lower section, an octagonal "
            "middle section and a cylindrical top that carried a fire. Most modern estimates put its total "
            "height at roughly 100 metres, which would have made it one of the tallest structures built by "
            "people for many centuries. Sailors could reportedly see the light, and the smoke of the fire "
            "by day, from far out at sea.",
            "The lighthouse survived for more than a thousand years. A series of strong earthquakes between "
            "956 and 1323 AD damaged it badly, and by the fourteenth century it was an abandoned ruin. In "
            "1480 the Mamluk sultan Qaitbay built a fortress on the same site, reusing some of the fallen "
            "stone; the Citadel of Qaitbay still stands there today. Underwater surveys since the 1990s have "
            "found large blocks and statues in the harbour that probably belonged to the Pharos.",
            "The name lived on: the word for lighthouse in several languages, such as phare in French and "
            "faro in Italian and Spanish, comes from Pharos.",
        ],
    ),
    (
        "The Eddystone Lighthouse",
        [
            "The Eddystone Rocks lie in the English Channel about 14 kilometres south-west of Rame Head, "
            "near Plymouth. They are covered at high tide and wrecked many ships, so they became the site of "
            "the first lighthouse built on an open-sea rock. Four different lighthouses have stood there.",
            "The first was built by Henry Winstanley and lit in 1698. It was an ornate wooden tower, and it "
            "was swept away in the Great Storm of November 1703 while Winstanley himself was on the rock "
            "making repairs; no trace of him was found. The second, designed by John Rudyerd, was a timber "
            "tower around a core of stone that was completed in 1709. It lasted almost fifty years until it "
            "burned down in 1755.",
            "The third lighthouse, by the civil engineer John Smeaton, was first lit in 1759. Smeaton built "
            "it of granite and Portland stone blocks that were dovetailed together, and he used a hydraulic "
            "lime that set under water. His design became the model for rock lighthouses around the world. "
            "The tower itself stood firm, but the rock beneath it was eroding, so it was replaced. The upper "
            "part was taken down and rebuilt on Plymouth Hoe, where it is known as Smeaton's Tower.",
            "The present lighthouse, designed by James Douglass, was completed in 1882 on a neighbouring "
            "part of the reef. It is 49 metres tall. The stump of Smeaton's tower can still be seen next to "
            "it. The Eddystone light was automated in 1982 and a helipad was added above the lantern.",
        ],
    ),
    (
        "Modern Lights and Automation",
        [
            "For most of their history lighthouses needed keepers who trimmed wicks, wound the clockwork "
            "that turned the lens and kept the glass clean. The biggest improvement in the light itself came "
            "from the Fresnel lens, which the French physicist Augustin Fresnel introduced in 1822. By using "
            "rings of glass prisms instead of one thick lens, it gathered far more of the light into a "
            "narrow beam, so a lamp could be seen more than 30 kilometres away.",
            "Electric lamps, automatic bulb changers and reliable timers made the resident keeper "
            "unnecessary during the twentieth century. In England and Wales, Trinity House automated its "
            "lighthouses one by one; the last keepers left the North Foreland lighthouse in Kent in November "
            "1998. In the United States the Coast Guard automated nearly every station by 1990. Boston Light "
            "was the exception, because a federal law required it to remain staffed.",
            "Today many lights use long-life LED lanterns powered by solar panels and batteries, and they "
            "are monitored remotely. Satellite navigation such as GPS means that ships rely on lighthouses "
            "much less than before, and some lights have been switched off. Many others are still kept "
            "working as aids to navigation, and a large number of historic towers are now museums, holiday "
            "cottages or protected monuments.",
        ],
    ),
]


def build(path: Path) -> None:
    rl_config.invariant = 1  # fixed timestamps and document id: reproducible bytes
    styles = getSampleStyleSheet()
    doc = SimpleDocTemplate(
        str(path),
        pagesize=A4,
        title=TITLE,
        author="citegate sample corpus",
        leftMargin=2.5 * cm,
        rightMargin=2.5 * cm,
        topMargin=2.5 * cm,
        bottomMargin=2.5 * cm,
    )
    story: list[object] = []
    for number, (heading, paragraphs) in enumerate(PAGES):
        if number:
            story.append(PageBreak())
        story.append(Paragraph(heading, styles["Heading1"]))
        for text in paragraphs:
            story.append(Paragraph(text, styles["BodyText"]))
            story.append(Spacer(1, 0.3 * cm))
    doc.build(story)


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("lighthouses.pdf")
    build(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
