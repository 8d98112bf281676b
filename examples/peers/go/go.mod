module cyan/peers

go 1.19
