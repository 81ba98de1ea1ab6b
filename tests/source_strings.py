"""The string literals a module's code holds, its docstrings left out: what the code may write or
typeset (the principle tests over the companion's sources read them)."""

import ast


def string_literals(tree: ast.AST):
    """Every ``str`` constant of ``tree`` but the docstrings of its module, classes and functions."""
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n
