"""Sphinx configuration of the collection's documentation site (`make docs`, HTML in .build/docs/html).

The Makefile lays the sources out first: the plugin and role pages antsibull-docs writes from the
collection (collection/), the guides of docs/ (guides/), the examples they link to (examples/) and
index.rst from this folder. The build runs offline: no intersphinx inventory is fetched.
"""

project = "gpupool.vcf"
copyright = "the gpupool.vcf authors"  # pylint: disable=redefined-builtin
title = "gpupool.vcf: a pooled NVIDIA GPU platform on VMware Cloud Foundation"
html_short_title = "gpupool.vcf"

extensions = ["sphinx_antsibull_ext", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# the guides' headings are link targets (docs/design.md#several-vcenters)
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

pygments_style = "ansible"
# the plugin pages name their languages; an untagged block of a guide stays plain text
highlight_language = "none"

html_theme = "sphinx_ansible_theme"
html_title = title
html_show_sphinx = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
html_theme_options = {"display_version": False}

default_role = "any"
nitpicky = True
