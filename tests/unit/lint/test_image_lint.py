"""The image checks of `captf lint image` on images described as data: paths, links,
the mirror's two layouts, labels and user."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from controller.core.contract.roles import Role
from controller.lint.image_rules import (
    Entry,
    ImageFacts,
    Kind,
    lint_image,
    mirrored,
    resolve,
)

D, F = Entry(Kind.DIR, 0o755), Entry(Kind.FILE, 0o644)
X = Entry(Kind.FILE, 0o755)
LABELS = {
    "io.captf.contract": "v1alpha1",
    "io.captf.role": "machine",
    "io.captf.runtime": "tofu",
    "io.captf.runtime.version": "1.12.6",
}
GOOD: dict[str, Entry] = {
    "captf": D,
    "captf/module": D,
    "captf/module/main.tf": F,
    "captf/runtime": X,
}
LOCAL = "registry.opentofu.org/hashicorp/local"


def link(target: str) -> Entry:
    return Entry(Kind.SYMLINK, 0o777, target)


def with_parents(entries: Mapping[str, Entry]) -> dict[str, Entry]:
    """The entries and their parent directories, as a real image's tree has them."""
    found = dict(entries)
    for path in entries:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            found.setdefault("/".join(parts[:depth]), D)
    return found


def image(
    entries: Mapping[str, Entry] | None = None,
    *,
    labels: Mapping[str, str] = LABELS,
    user: str = "65532",
    required: frozenset[str] = frozenset(),
) -> ImageFacts:
    return ImageFacts(
        entries=with_parents(GOOD if entries is None else entries),
        labels=labels,
        user=user,
        required_providers=required,
    )


def rules(facts: ImageFacts, role: Role = Role.MACHINE) -> list[tuple[str, str]]:
    return [(f.rule, f.severity.value) for f in lint_image(facts, role)]


def test_a_good_image_has_no_finding() -> None:
    assert rules(image()) == []


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({**GOOD, "captf/runtime": link("/usr/bin/tofu"), "usr/bin/tofu": X}, []),
        ({**GOOD, "captf/runtime": link("../opt/tofu"), "opt/tofu": X}, []),
        ({**GOOD, "captf/runtime": link("/usr/bin/tofu")}, ["image-runtime-present"]),
        ({**GOOD, "captf/runtime": F}, ["image-runtime-present"]),
        ({**GOOD, "captf/runtime": D}, ["image-runtime-present"]),
        ({**GOOD, "captf/runtime": link("runtime")}, ["image-runtime-present"]),
        ({k: v for k, v in GOOD.items() if k != "captf/runtime"}, ["image-runtime-present"]),
        ({"captf": D, "captf/runtime": X}, ["image-module-present"]),
        ({**GOOD, "captf/module/main.tf": D}, ["image-module-present"]),
        ({**GOOD, "captf/module/README.md": F, "captf/module/main.tf": link("x")}, None),
        ({**GOOD, "captf/module/vars.tf": link("/etc/passwd"), "etc/passwd": F}, None),
        ({**GOOD, "captf/module/vars.tf": link("main.tf")}, []),
    ],
    ids=[
        "runtime-absolute-link",
        "runtime-relative-link",
        "runtime-broken-link",
        "runtime-not-executable",
        "runtime-a-directory",
        "runtime-link-loop",
        "runtime-missing",
        "module-missing",
        "module-without-file",
        "module-file-a-broken-link",
        "module-link-out-of-it",
        "module-link-inside",
    ],
)
def test_fixed_paths(entries: dict[str, Entry], expected: list[str] | None) -> None:
    found = [rule for rule, _ in rules(image(entries))]
    if expected is None:  # a broken or escaping link in the module
        assert "image-module-link" in found
    else:
        assert found == expected


def test_resolve_stops_at_the_root_and_follows_absolute_links_inside_the_image() -> None:
    entries = {"a": D, "a/b": link("../../../c"), "c": link("/d/e"), "d": D, "d/e": F}
    assert resolve(entries, "a/b") == "d/e"
    assert resolve(entries, "a/missing") is None


def test_anything_under_a_reserved_path_is_an_error_naming_five_paths_at_most() -> None:
    entries = {**GOOD, "captf/bin": D, "captf/config": D}
    assert rules(image(entries)) == []  # an empty directory hides nothing
    shipped = {f"captf/bin/tool{n}": F for n in range(7)}
    found = lint_image(image({**entries, **shipped, "var/run/captf/credentials": F}), Role.MACHINE)
    assert [(f.rule, f.where.file if f.where else None) for f in found] == [
        ("image-reserved-paths", "/captf/bin"),
        ("image-reserved-paths", "/var/run/captf/credentials"),
    ]
    assert found[0].message.endswith("/captf/bin/tool4 and 2 more")


@pytest.mark.parametrize(
    ("labels", "role", "expected"),
    [
        (LABELS, Role.CLUSTER, [("image-label-role", "error")]),
        (
            {**LABELS, "io.captf.contract": "v1beta1"},
            Role.MACHINE,
            [("image-label-contract", "warning")],
        ),
        (
            {**LABELS, "io.captf.runtime": "pulumi"},
            Role.MACHINE,
            [("image-label-runtime", "error")],
        ),
        (
            {},
            Role.MACHINE,
            [
                ("image-label-contract", "warning"),
                ("image-label-role", "warning"),
                ("image-label-runtime", "warning"),
                ("image-label-runtime", "warning"),
            ],
        ),
    ],
    ids=["role-mismatch", "contract-mismatch", "unknown-runtime", "no-labels"],
)
def test_labels(labels: dict[str, str], role: Role, expected: list[tuple[str, str]]) -> None:
    assert rules(image(labels=labels), role) == expected


@pytest.mark.parametrize("user", ["", "root", "0", "0:0", "root:wheel"])
def test_running_as_root_is_a_warning(user: str) -> None:
    assert rules(image(user=user)) == [("image-user-root", "warning")]


@pytest.mark.parametrize("user", ["65532", "65532:65532", "captf"])
def test_a_user_other_than_root_passes(user: str) -> None:
    assert rules(image(user=user)) == []


UNPACKED = {
    "captf/providers": D,
    f"captf/providers/{LOCAL}/2.9.0/linux_amd64/terraform-provider-local_v2.9.0": X,
}
PACKED = {
    "captf/providers": D,
    f"captf/providers/{LOCAL}/index.json": F,
    f"captf/providers/{LOCAL}/2.9.0.json": F,
    f"captf/providers/{LOCAL}/terraform-provider-local_2.9.0_linux_amd64.zip": F,
}


@pytest.mark.parametrize("mirror", [UNPACKED, PACKED], ids=["unpacked", "packed"])
def test_a_mirror_in_either_layout_covers_what_it_holds(mirror: dict[str, Entry]) -> None:
    entries = {**GOOD, **mirror}
    assert rules(image(entries, required=frozenset({LOCAL}))) == []
    assert mirrored(with_parents(entries), LOCAL, "linux_amd64")
    assert not mirrored(with_parents(entries), LOCAL, "linux_arm64")
    lacking = image(entries, required=frozenset({LOCAL, "registry.opentofu.org/hashicorp/aws"}))
    assert rules(lacking) == [("image-providers-complete", "error")]


def test_a_mirror_entry_out_of_either_layout_is_an_error() -> None:
    entries = {**GOOD, **UNPACKED, "captf/providers/README": F, f"captf/providers/{LOCAL}/x": F}
    found = lint_image(image(entries), Role.MACHINE)
    assert [f.rule for f in found] == ["image-providers-layout"]
    assert "/captf/providers/README" in found[0].message


def test_required_providers_without_a_mirror_are_a_warning_and_none_required_is_fine() -> None:
    assert rules(image(required=frozenset({LOCAL}))) == [("image-providers-absent", "warning")]
    assert rules(image({**GOOD, "captf/providers": D})) == []


def test_a_platform_problem_is_an_error() -> None:
    facts = ImageFacts(entries=GOOD, labels=LABELS, user="1", platform_problem="for linux/s390x")
    assert rules(facts) == [("image-platform", "error")]
