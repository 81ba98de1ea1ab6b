"""How each section's figures are drawn: one module per section, each a plain function of the numbers
a figure shows (arrays, a protocol, results) that returns a matplotlib figure. A section decides what
to show and hands these the numbers; nothing here plans, runs or reads a cache."""
