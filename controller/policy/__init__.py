"""Policies on plans (TerraformPolicy): rules in CEL, compiled and costed (`rules.py`,
`cost.py`, over cel-cpp's checked tree read by `checked_ast.py`), and plans judged within
a cost limit (`judge.py`). No I/O: the admission webhook, the runner and `captf policy
test` call it; the decision core reads only the verdicts the runner reports."""
