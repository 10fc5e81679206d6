"""The ``key_averages`` table of the profiled training step, as Markdown.

A profile's times differ from run to run, so the table is the one
``profile_step.py --snapshot`` stored in ``trace_snapshot.json`` (``make
profile-snapshot`` takes a new one). PyTorch prints it as fixed-width text
about 200 characters wide; here its columns become a Markdown table, which
the page renders whole, with the columns the page discusses.
"""

import json
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent
COLUMNS = ("Name", "Self CPU", "CPU total", "Self ACCINTE", "ACCINTE total", "# of Calls")


def rows(table: str):
    """The header and the rows of PyTorch's text table, cells split at runs of
    two or more spaces."""
    lines = [line for line in table.splitlines() if line.strip()]
    body = [line for line in lines if not set(line.strip()) <= set("- ")]
    cells = [re.split(r"\s{2,}", line.strip()) for line in body]
    header = cells[0]
    return header, [row for row in cells[1:] if len(row) == len(header)], \
        [line for line in body if len(re.split(r"\s{2,}", line.strip())) != len(header)]


def main() -> None:
    snapshot = json.loads((HERE / "trace_snapshot.json").read_text())
    header, table_rows, totals = rows(snapshot["table"])
    keep = [header.index(column) for column in COLUMNS]
    print("| " + " | ".join(COLUMNS) + " |")
    print("| " + " | ".join(["---"] + ["---:"] * (len(COLUMNS) - 1)) + " |")
    for row in table_rows:
        cells = [row[i] for i in keep]
        cells[0] = f"`{cells[0]}`"
        print("| " + " | ".join(cells) + " |")
    print()
    print(f"{' · '.join(totals)} (torch {snapshot['torch']}, one training step "
          "of `profile_step.py`, sorted by self device time, first 12 rows)")


if __name__ == "__main__":
    main()
