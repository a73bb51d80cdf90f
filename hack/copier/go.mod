module captf.io/copier

go 1.22
