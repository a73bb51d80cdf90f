"""Module images: what `captf image build` puts in one and how it is pushed."""
