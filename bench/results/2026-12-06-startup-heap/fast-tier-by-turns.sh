#!/bin/bash
# make test-fast's pytest, the tree before (0091c5d, /tmp/before-heap) and this one by turns
export PYTHONDONTWRITEBYTECODE=
for round in 1 2; do
  for tree in /tmp/before-heap /work/main; do
    cd $tree
    read -r _ u ni s i w q sq st _ < /proc/stat; b0=$((u+ni+s+q+sq+st)); i0=$((i+w))
    start=$(date +%s.%N)
    PYTHONPATH=$tree/src /work/main/.venv/bin/python -m pytest -q -m "unit or server" -n 3 --dist loadfile --no-loadscope-reorder -p no:cacheprovider 2>&1 | tail -1 > /tmp/fast-$round-$(basename $tree).txt
    end=$(date +%s.%N)
    read -r _ u ni s i w q sq st _ < /proc/stat; b1=$((u+ni+s+q+sq+st)); i1=$((i+w))
    echo "$(date -u +%H:%MZ) $tree round $round: $(cat /tmp/fast-$round-$(basename $tree).txt) wall $(echo "$end - $start" | bc) s busy $(( (b1-b0)/100 )) idle $(( (i1-i0)/100 )) core-s" >> /tmp/fastpair.txt
  done
done
