"""The claims tables' columns, shared by the CIFAR sections' heads."""

# Column widths of a claims table set across the page (table*).
CLAIMS_ALIGN = (
    r">{\raggedright\arraybackslash}p{0.17\textwidth}>{\raggedright\arraybackslash}p{0.12\textwidth}"
    r">{\raggedright\arraybackslash}p{0.26\textwidth}r>{\raggedright\arraybackslash}p{0.06\textwidth}"
    r">{\raggedright\arraybackslash}p{0.05\textwidth}>{\raggedright\arraybackslash}p{0.13\textwidth}"
)
