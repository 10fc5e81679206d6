"""Draws allocated and reserved memory over the training loop as an SVG.

The readings are those of ``training_memory.py``, taken afresh against this
stage; the page embeds the SVG this prints. No plotting library: the figure
is two step lines and an axis, written as SVG text.
"""

from training_memory import readings

WIDTH, HEIGHT = 680, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 20, 50
MiB = 1 << 20


def main() -> None:
    rows = readings()
    top_mib = (max(reserved for *_, reserved in rows) // (4 * MiB) + 2) * 4
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + plot_w * i / len(rows)

    def y(nbytes: float) -> float:
        return TOP + plot_h * (1 - nbytes / (top_mib * MiB))

    def steps(values) -> str:
        # A step line: each reading holds until the next one.
        points = []
        for i, value in enumerate(values):
            points += [f"{x(i):.1f},{y(value):.1f}", f"{x(i + 1):.1f},{y(value):.1f}"]
        return " ".join(points)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    for mib in range(0, top_mib + 1, 4):
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(mib * MiB):.1f}" '
                   f'y2="{y(mib * MiB):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(mib * MiB) + 4:.1f}" '
                   f'text-anchor="end">{mib} MiB</text>')
    for i, (step, phase, _, _) in enumerate(rows):
        if phase == "forward":
            out.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{TOP}" '
                       f'y2="{TOP + plot_h}" stroke="#eee"/>')
            out.append(f'<text x="{x(i + 2):.1f}" y="{TOP + plot_h + 16}" '
                       f'text-anchor="middle">{step}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 10}" '
               'text-anchor="middle">training step (four readings each: forward, '
               'backward, optimizer step, zero_grad)</text>')
    series = [("reserved", [r[3] for r in rows], "#d62728"),
              ("allocated", [r[2] for r in rows], "#1f77b4")]
    for n, (name, values, colour) in enumerate(series):
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{steps(values)}"/>')
        out.append(f'<line x1="{WIDTH - RIGHT + 15}" x2="{WIDTH - RIGHT + 40}" '
                   f'y1="{TOP + 20 + 20 * n}" y2="{TOP + 20 + 20 * n}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 46}" y="{TOP + 24 + 20 * n}">'
                   f'{name}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" '
               f'y2="{TOP + plot_h}" stroke="black"/>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
