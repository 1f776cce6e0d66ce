"""Video transforms: probe a container from its headers and packets, cut clips and extract their keyframes."""
