"""API versions: what v1beta1 changes of v1alpha1 (changes.py), and converting an object of
CAPTF's group between the two (convert.py), for the CRDs' conversion webhook and for
`captf decide -f` on a v1alpha1 snapshot. Imports only the basics."""
